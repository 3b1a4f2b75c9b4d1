"""Benchmark the pseudo-label solvers against each other and a generic conic solver.

For each (N, K, lambda) and each kind of predictions (``realistic``: softmax of confident logits,
most rows confident; ``random``: softmax of standard normal logits) this measures, single
threaded and best of ``--repeat`` runs:

* the default method (``method="auto"``): on the CPU, for the collision loss, the compiled
  kernels of :mod:`skcce.solvers._kernels` (interior point with column generation,
  certified by the dual of :mod:`skcce.solvers._duality`),
* the torch path of the same method (the reference dual Newton solver, ``SKCCE_SOLVER=torch``),
* the paper's EM (Algorithm 1 inner loop; compiled as well),
* projected gradient descent,
* cvxpy + Clarabel on the exponential-cone form (time of ``problem.solve`` including
  canonicalisation, and Clarabel's own solve time),

each asked for a certified relative gap of 1e-6. "passes" counts passes over the data: Newton
best-response evaluations (torch path), iterations of the compiled interior point, EM or PGD
iterations, interior-point iterations of Clarabel. The hard cases of issue 14 (exact ties
between a row's leading classes, exact zeros in sigma, K = 2, lambda from 1 to 1e4 with N = 250)
have their own rows. Times are single threaded (``--threads 1``, the default) unless
``--threads 0`` (torch's default thread count); the "threads" table compares both.
"rel. to conic" is ``(F - F_conic) / max(|F_conic|, 1)`` (negative: better than the conic solver).

Usage::

    python benchmarks/bench_solvers.py            # full run, writes docs/benchmarks.md
    python benchmarks/bench_solvers.py --quick    # small sizes only, no file written
    python benchmarks/bench_solvers.py --threads 0  # torch's default thread count
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

import skcce.solvers._compiled as _compiled
import skcce.solvers._newton as _newton
from skcce.solvers import solve_pseudo_labels

START, END = "<!-- bench_solvers:start -->", "<!-- bench_solvers:end -->"
_DEFAULT_THREADS = torch.get_num_threads()  # before anything changes it
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
TOL = 1e-6


def make_probs(n, k, kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "ties":  # exact ties between each row's two leading classes, duplicated rows
        P = make_probs(n, k, "realistic", seed)
        top2 = P.topk(2, dim=1).indices
        P[torch.arange(n), top2[:, 1]] = P.amax(dim=1)
        P = P / P.sum(dim=1, keepdim=True)
        P[n // 2 :] = P[0]
        return P
    if kind == "zeros":  # exact zeros in sigma (60% of the entries), one-hot rows
        P = make_probs(n, k, "random", seed) ** 2
        keep = (torch.rand(n, k, generator=g, dtype=torch.float64) < 0.4) | (
            P == P.amax(1, keepdim=True)
        )
        P = torch.where(keep, P, 0)
        P[: n // 10] = torch.nn.functional.one_hot(torch.arange(n // 10) % k, k).double()
        return P / P.sum(dim=1, keepdim=True)
    if kind == "random":
        logits = torch.randn(n, k, generator=g, dtype=torch.float64)
    else:  # 80% confident rows (a clear winner), 20% ambiguous
        logits = torch.randn(n, k, generator=g, dtype=torch.float64)
        winner = torch.randint(0, k, (n,), generator=g)
        confident = torch.rand(n, generator=g) < 0.8
        boost = torch.where(confident, 6.0, 1.0).to(torch.float64)
        logits[torch.arange(n), winner] += boost
    return torch.softmax(logits, dim=1)


class _CountCalls:
    """Count the Newton solver's best-response evaluations (passes over the data)."""

    def __init__(self):
        self.calls = 0
        self._orig = _newton.best_response

    def __enter__(self):
        def counted(problem, w):
            self.calls += 1
            return self._orig(problem, w)

        _newton.best_response = counted
        return self

    def __exit__(self, *exc):
        _newton.best_response = self._orig


def run_skcce(P, lam, method, repeat, max_iter=None, compiled=True):
    best, out, passes = np.inf, None, None
    with _compiled.using(compiled):
        for _ in range(repeat):
            with _CountCalls() as cc:
                t = time.perf_counter()
                res = solve_pseudo_labels(P, lam=lam, method=method, tol=TOL, max_iter=max_iter)
                dt = time.perf_counter() - t
            if dt < best:
                best, out = dt, res
                passes = cc.calls if res.method == "newton" and cc.calls else res.n_iter
    return best, out, passes


def run_conic(P, lam, repeat, time_limit):
    import cvxpy as cp

    Pn = P.numpy()
    n, k = Pn.shape
    best, value, stime, iters, status = np.inf, np.nan, np.nan, None, None
    for _ in range(repeat):
        Y = cp.Variable((n, k), nonneg=True)
        obj = -cp.sum(cp.log(cp.sum(cp.multiply(Pn, Y), axis=1)))
        obj = obj - lam * cp.sum(cp.log(cp.sum(Y, axis=0) / n)) / k
        prob = cp.Problem(cp.Minimize(obj), [cp.sum(Y, axis=1) == 1])
        t = time.perf_counter()
        try:
            prob.solve(solver=cp.CLARABEL, time_limit=time_limit)
        except cp.error.SolverError as exc:  # pragma: no cover - reported, not raised
            status = f"error: {exc}"[:40]
            break
        dt = time.perf_counter() - t
        status = prob.status
        if dt < best:
            best = dt
            value = prob.value + lam * np.log(1.0 / k)
            stime = prob.solver_stats.solve_time
            iters = prob.solver_stats.num_iters
        if dt > 5.0:
            break  # slow: one measurement is enough
    return best, value, stime, iters, status


def fmt_t(t):
    if not np.isfinite(t):
        return "–"
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def bench(configs, kinds, repeat, conic_limit, hard=False):
    rows = []
    for n, k, lam in configs:
        for kind in kinds:
            P = make_probs(n, k, kind)
            big = n * k > 100_000
            conic = run_conic(P, lam, 1 if big else repeat, conic_limit)
            ref = conic[1]
            res = {}
            res["default"] = run_skcce(P, lam, "auto", repeat)
            # (one run of the torch path on the hard cases: there it may take seconds)
            res["torch"] = run_skcce(P, lam, "auto", 1 if big or hard else repeat, compiled=False)
            if not hard:
                res["pgd"] = run_skcce(P, lam, "pgd", 1 if big else repeat)
                res["em"] = run_skcce(P, lam, "em", 1, max_iter=300 if big else 5000)
            best_f = min(r[1].objective for r in res.values())
            if not np.isfinite(ref):
                ref = best_f
            for name, (t, r, passes) in res.items():
                rel = (r.objective - ref) / max(abs(ref), 1.0)
                rows.append(
                    (
                        n,
                        k,
                        lam,
                        kind,
                        name,
                        t,
                        passes,
                        r.converged,
                        rel,
                        r.gap / max(abs(r.objective), 1),
                    )
                )
            ct, cv, cs, ci, status = conic
            rel = (cv - best_f) / max(abs(best_f), 1.0) if np.isfinite(cv) else np.nan
            rows.append((n, k, lam, kind, f"conic ({status})", ct, ci, None, rel, cs))
            print(f"done {n} {k} {lam} {kind}", flush=True)
    return rows


def seed_summary(configs, kinds, seeds, repeat):
    """Default vs PGD vs conic over several seeds (best of ``repeat`` solves each): the spread
    behind one row."""
    lines = [
        "| N | K | λ | σ | seeds | default: median (max) | torch path: median | PGD: median "
        "| conic: median | torch/default: median (min) | PGD/default: median (min) "
        "| conic/default: median (min) | default certified |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, k, lam in configs:
        for kind in kinds:
            td, tt, tp, tc, ok = [], [], [], [], 0
            for seed in seeds:
                P = make_probs(n, k, kind, seed=seed)
                t, r, _ = run_skcce(P, lam, "auto", repeat)
                td.append(t)
                ok += bool(r.converged)
                tt.append(run_skcce(P, lam, "auto", repeat, compiled=False)[0])
                tp.append(run_skcce(P, lam, "pgd", repeat)[0])
                tc.append(run_conic(P, lam, repeat, 300.0)[0])
            td, tt, tp, tc = map(np.asarray, (td, tt, tp, tc))
            lines.append(
                f"| {n} | {k} | {lam:g} | {kind} | {len(td)} | {fmt_t(np.median(td))} "
                f"({fmt_t(td.max())}) | {fmt_t(np.median(tt))} | {fmt_t(np.median(tp))} "
                f"| {fmt_t(np.median(tc))} | {np.median(tt / td):.1f}× ({(tt / td).min():.1f}×) "
                f"| {np.median(tp / td):.1f}× ({(tp / td).min():.1f}×) "
                f"| {np.median(tc / td):.1f}× ({(tc / td).min():.1f}×) | {ok}/{len(td)} |"
            )
            print(f"seeds done {n} {k} {kind}", flush=True)
    return "\n".join(lines)


def threads_table(configs, repeat):
    """The default and the torch path at torch's default thread count and at one thread."""
    default_threads = _DEFAULT_THREADS
    lines = [
        f"| N | K | λ | σ | default, {default_threads} threads | default, 1 thread "
        f"| torch path, {default_threads} threads | torch path, 1 thread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    old = torch.get_num_threads()
    for n, k, lam, kind in configs:
        P = make_probs(n, k, kind)
        cells = []
        for compiled in (True, False):
            for threads in (default_threads, 1):
                torch.set_num_threads(threads)
                cells.append(fmt_t(run_skcce(P, lam, "auto", repeat, compiled=compiled)[0]))
        lines.append(f"| {n} | {k} | {lam:g} | {kind} | " + " | ".join(cells) + " |")
    torch.set_num_threads(old)
    return "\n".join(lines)


def table(rows):
    lines = [
        "| N | K | λ | σ | method | time | passes | certified | rel. to conic | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by = {}
    for r in rows:
        by.setdefault(r[:4], {})[r[4].split(" ")[0]] = r
    for group in by.values():
        d = group["default"][5]
        for name, r in group.items():
            n, k, lam, kind, label, t, passes, conv, rel, extra = r
            if name == "conic":
                note = f"Clarabel's own time {fmt_t(extra)}; **conic/default = {t / d:.1f}×**"
                cert = "–"
            else:
                note = f"certified rel. gap {extra:.1e}"
                if name in ("pgd", "torch"):
                    note += f"; **{name}/default = {t / d:.1f}×**"
                cert = "yes" if conv else "no"
            rel_s = "–" if rel is None or not np.isfinite(rel) else f"{rel:+.1e}"
            lines.append(
                f"| {n} | {k} | {lam:g} | {kind} | {label} | {fmt_t(t)} | {passes} | {cert} "
                f"| {rel_s} | {note} |"
            )
    return "\n".join(lines)


def write_doc(text):
    body = f"{START}\n{text}\n{END}"
    if DOC.exists():
        doc = DOC.read_text()
        if START in doc and END in doc:
            pre, rest = doc.split(START, 1)
            _, post = rest.split(END, 1)
            doc = pre + body + post
        else:
            doc = doc.rstrip("\n") + "\n\n" + body + "\n"
    else:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        doc = f"# Benchmarks\n\n{body}\n"
    DOC.write_text(doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no file written")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--conic-limit", type=float, default=300.0, help="seconds per solve")
    parser.add_argument("--seeds", type=int, default=8, help="seeds of the spread table")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (0: torch's default; default 1)"
    )
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    # compile (or load from numba's cache) before timing anything
    t0 = time.perf_counter()
    solve_pseudo_labels(make_probs(20, 3, "random"), lam=10.0)
    solve_pseudo_labels(make_probs(20, 3, "random"), lam=10.0, method="em")
    warm = time.perf_counter() - t0
    configs = [(250, 10, 100.0), (250, 20, 100.0)]
    if not args.quick:
        configs.append((4096, 100, 100.0))
    rows = bench(configs, ["realistic", "random"], args.repeat, args.conic_limit)
    hard_rows = []
    for lam in (1.0, 100.0, 1e3, 1e4):
        hard_rows += bench([(250, 10, lam)], ["ties", "zeros"], args.repeat, args.conic_limit, True)
    for lam in (1.0, 1e3, 2.5e3, 1e4):
        hard_rows += bench([(250, 10, lam)], ["random"], args.repeat, args.conic_limit, True)
    for lam in (1.0, 100.0, 1e4):
        hard_rows += bench([(250, 2, lam)], ["random"], args.repeat, args.conic_limit, True)
    thread_configs = [(250, 10, 100.0, "realistic"), (250, 10, 1e4, "random")]
    if not args.quick:
        thread_configs.append((4096, 100, 100.0, "realistic"))
    threads_text = threads_table(thread_configs, args.repeat)
    machine = (
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs ({threads} torch thread(s) "
        f"used; torch's default here is {_DEFAULT_THREADS}), "
        f"Python {platform.python_version()}, torch {torch.__version__}; load average at start "
        f"{os.getloadavg()[0]:.2f}. Target: certified relative gap {TOL:g}; times best of "
        f"{args.repeat} (one run for EM and for the large conic/PGD solves). Compiled kernels "
        f"loaded (or compiled) in {warm:.2f} s before timing."
    )
    spread = seed_summary(
        configs[:2], ["realistic", "random"], range(1, args.seeds + 1), args.repeat
    )
    text = (
        f"## Pseudo-label solvers (`benchmarks/bench_solvers.py`)\n\n{machine}\n\n{table(rows)}"
        f"\n\n**Hard cases** (issue 14): exact ties between each row's two leading classes, "
        f"exact zeros in σ, K = 2, λ from 1 to 1e4, N = 250.\n\n{table(hard_rows)}"
        f"\n\n**Threads**: torch's default thread count beside one thread (best of "
        f"{args.repeat}).\n\n{threads_text}"
        f"\n\n**Spread over seeds** (seeds 1–{args.seeds}, best of {args.repeat} solves each, same "
        f"run): the N = 250 "
        f"rows above are one instance each; this is the distribution of the ratios.\n\n{spread}"
    )
    print(text)
    if not args.quick:
        write_doc(text)


if __name__ == "__main__":
    main()
