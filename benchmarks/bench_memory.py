"""Benchmark the memory of CCEClustering.fit / predict on a large float32 feature matrix.

A 1 000 000 x 256 float32 array (about 1 GB; a mixture of as many Gaussians as clusters, 10
unless ``--n-clusters`` says otherwise, generated in place chunk by chunk) is clustered in a
fresh process. We read the process's peak resident memory
(``VmHWM`` of ``/proc/self/status``, reset just before each phase by writing 5 to
``/proc/self/clear_refs``; where the kernel does not allow that, a thread samples ``VmRSS``
every 5 ms) and report the growth above the resident memory just before the phase, which
already holds the array, the interpreter and torch. The estimator must stream batches from the
user's array: the issue's target is a peak growth of at most 1.3 GB during ``fit``.

The peer, measured the same way in its own fresh process on the same array, is scikit-learn's
``MiniBatchKMeans`` with the same number of clusters, which also streams mini-batches; the
array's own size is the other yardstick. ``fit`` keeps no (N, K) array of probabilities of
the training data (each restart's labels and score come from one streaming pass), so its
growth should not scale with N x K: ``--n-clusters 1000`` checks the issue's K = 1000 target.

Settings: ``max_epochs=1`` and ``n_init=1`` so that the run takes minutes; an epoch touches every
batch once and allocates nothing that lives past its batch (the per-epoch history aside), so
further epochs repeat the same peak. One torch thread (``--threads 1``): the figures are memory,
not speed, and a shared machine's contended OpenMP pool only slows the run down.

Run ``python benchmarks/bench_memory.py --threads 1`` (a few minutes on two CPU cores; needs
about 2.5 GB of free memory per process, one process at a time). It prints a markdown table and
rewrites its own section of ``docs/benchmarks.md`` (markers ``<!-- bench_memory:start -->`` and
``<!-- bench_memory:end -->``, or the section named by ``--section``); other sections are kept.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

MIB = 2**20


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class PeakRSS:
    """Peak resident memory (MiB) of this process over a ``with`` block.

    Resets the kernel's high-water mark (``VmHWM``) on entry when ``/proc/self/clear_refs``
    accepts it; otherwise samples ``VmRSS`` from a thread every 5 ms.
    """

    def __enter__(self):
        self.before = _status_kib("VmRSS") / 1024
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.method = "VmHWM"
        except OSError:
            self.method = "sampled VmRSS"
        self._peak = self.before
        self._done = threading.Event()
        if self.method != "VmHWM":
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        self.start = time.perf_counter()
        return self

    def _sample(self):
        while not self._done.wait(0.005):
            self._peak = max(self._peak, _status_kib("VmRSS") / 1024)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        if self.method == "VmHWM":
            self.peak = _status_kib("VmHWM") / 1024
        else:
            self._done.set()
            self._thread.join()
            self.peak = max(self._peak, _status_kib("VmRSS") / 1024)
        return False


def make_mixture(n, d, n_centres=10, seed=0, chunk=65536):
    """(n, d) float32 Gaussian mixture, filled in place chunk by chunk (no float64 copy)."""
    rng = np.random.default_rng(seed)
    centres = (3 * rng.standard_normal((n_centres, d))).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, chunk):
        block = X[start : start + chunk]
        rng.standard_normal(out=block, dtype=np.float32)
        block += centres[rng.integers(n_centres, size=len(block))]
    return X


def child(method, n, d, threads, epochs=1, n_init=1, n_clusters=10):
    """Measure one estimator with ``n_clusters`` clusters in this (fresh) process; print one
    JSON line."""
    import torch

    torch.set_num_threads(threads)
    from sklearn.base import clone
    from sklearn.cluster import MiniBatchKMeans

    from skcce import CCEClustering

    X = make_mixture(n, d, n_centres=n_clusters)
    if method == "cce":
        est = CCEClustering(
            n_clusters=n_clusters, max_epochs=epochs, n_init=n_init, device="cpu",
            random_state=0,
        )  # fmt: skip
    else:
        est = MiniBatchKMeans(n_clusters=n_clusters, random_state=0)
    # warm up on a slice (a view): lazy imports and the allocator's first pools are not
    # what the phase needs per sample
    clone(est).fit(X[: max(2000, 2 * n_clusters)])
    out = {"method": method, "array_mib": X.nbytes / MIB, "threads": torch.get_num_threads()}
    with PeakRSS() as fit:
        est.fit(X)
    out["fit"] = {"before": fit.before, "peak": fit.peak, "seconds": fit.seconds}
    out["rss_method"] = fit.method
    with PeakRSS() as pred:
        labels = est.predict(X)
    out["predict"] = {"before": pred.before, "peak": pred.peak, "seconds": pred.seconds}
    out["clusters_used"] = int(len(np.unique(labels)))
    print(json.dumps(out))


def measure(method, n, d, threads, epochs=1, n_init=1, n_clusters=10):
    result = subprocess.run(
        [sys.executable, __file__, "--child", method, "--n", str(n), "--d", str(d),
         "--threads", str(threads), "--max-epochs", str(epochs), "--n-init", str(n_init),
         "--n-clusters", str(n_clusters)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"{method} child failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _uptime():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target-gb", type=float, default=1.3)
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--section",
        default="bench_memory",
        help="the section of --output it writes (another name keeps this one)",
    )
    parser.add_argument("--max-epochs", type=int, default=1)
    parser.add_argument("--check-n", type=int, default=200_000, help="rows of the epochs check")
    parser.add_argument("--n-init", type=int, default=1)
    parser.add_argument("--n-clusters", type=int, default=10, help="K of both estimators")
    parser.add_argument("--child", choices=["cce", "minibatchkmeans"], help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.child:
        child(
            args.child, args.n, args.d, args.threads, args.max_epochs, args.n_init,
            args.n_clusters,
        )  # fmt: skip
        return

    import torch

    torch.set_num_threads(args.threads)
    from _report import machine_lines, publish

    load_before = _uptime()
    results = []
    for method in ("cce", "minibatchkmeans"):
        start = time.perf_counter()
        settings = (args.max_epochs, args.n_init, args.n_clusters)
        results.append(measure(method, args.n, args.d, args.threads, *settings))
        print(f"[{method}] {time.perf_counter() - start:.0f} s: {results[-1]}", flush=True)
    checks = []  # does the peak grow with epochs and restarts? (smaller X, CCE only)
    for epochs, n_init in ((1, 1), (3, 1), (1, 3)):
        r = measure("cce", args.check_n, args.d, args.threads, epochs, n_init, args.n_clusters)
        checks.append((epochs, n_init, r["fit"]["peak"] - r["fit"]["before"], r["fit"]["seconds"]))
        print(f"[check] max_epochs={epochs} n_init={n_init}: {checks[-1]}", flush=True)
    load_after = _uptime()

    k = args.n_clusters
    names = {
        "cce": (
            f"CCEClustering(n_clusters={k}, max_epochs={args.max_epochs}, n_init={args.n_init})"
        ),
        "minibatchkmeans": f"MiniBatchKMeans(n_clusters={k})",
    }
    array_mib = results[0]["array_mib"]
    growth = {r["method"]: r["fit"]["peak"] - r["fit"]["before"] for r in results}
    date = datetime.date.today().isoformat()
    lines = [
        f"## Memory of fit and predict on {results[0]['array_mib']:.0f} MiB of features, "
        f"K = {args.n_clusters}{'' if args.threads == 1 else f', {args.threads} threads'} "
        "(`benchmarks/bench_memory.py`)",
        "",
        f"Measured {date} by `{' '.join(['python', 'benchmarks/bench_memory.py', *argv])}`.",
        "",
        *machine_lines(["cpu"], extra=(f"numpy {np.__version__}",)),
        f"- load average (1, 5, 15 min) before / after: {load_before} / {load_after}; "
        f"{os.cpu_count()} cores shared with other work",
        "",
        f"X: {args.n:,} x {args.d} float32 (a mixture of {k} Gaussians, {array_mib:.0f} MiB), "
        "C-contiguous; each estimator in a fresh process. *Before*: resident memory (RSS) just "
        "before the phase (the array, the interpreter, torch); *peak*: the high-water mark "
        f"during it ({results[0]['rss_method']}); *growth* = peak - before, the memory the "
        f"phase itself needs on top of the array. Target for `fit`: growth at most "
        f"{args.target_gb} GB ({args.target_gb * 1e9 / MIB:.0f} MiB). "
        f"max_epochs={args.max_epochs}, n_init={args.n_init}, {results[0]['threads']} torch "
        "thread, so that the run takes minutes; the check below measures what more epochs "
        "and restarts add.",
        "",
        "| estimator | phase | RSS before (MiB) | peak (MiB) | growth (MiB) "
        "| growth / array | peak - array (MiB) | time (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for phase in ("fit", "predict"):
            m = r[phase]
            g = m["peak"] - m["before"]
            lines.append(
                f"| {names[r['method']]} | {phase} | {m['before']:.0f} | {m['peak']:.0f} "
                f"| {g:.0f} | {g / array_mib:.2f} | {m['peak'] - array_mib:.0f} "
                f"| {m['seconds']:.1f} |"
            )
    ratio = growth["cce"] / max(growth["minibatchkmeans"], 1.0)
    target_mib = args.target_gb * 1e9 / MIB
    proba_mib = args.n * k * 8 / MIB  # what each restart kept before (issue 45)
    verdict = "within" if growth["cce"] <= target_mib else "ABOVE"
    whole = results[0]["fit"]["peak"] - array_mib
    whole_verdict = "within" if whole <= target_mib else "above"
    lines += [
        "",
        f"`fit` growth: {growth['cce']:.0f} MiB, {verdict} the {args.target_gb} GB target; "
        f"{ratio:.2f}x MiniBatchKMeans's {growth['minibatchkmeans']:.0f} MiB, "
        f"{growth['cce'] / array_mib:.2f}x the array; the whole process less the array "
        f"(*peak - array*: interpreter, torch and all) is {whole:.0f} MiB, {whole_verdict} "
        "the target. `fit` takes `labels_` and the restart's score from one streaming pass "
        "of at most 64 MB of float64 probabilities at a time; before issue 45 it kept the "
        "(N, K) float64 probabilities of the training data per restart "
        f"({proba_mib:.0f} MiB; this growth is {growth['cce'] / proba_mib:.2f}x that). "
        f"`predict` grew by {results[0]['predict']['peak'] - results[0]['predict']['before']:.0f}"
        " MiB (it labels the rows span by span).",
    ]
    check_mib = args.check_n * k * 8 / MIB
    lines += [
        "",
        f"Check on {args.check_n:,} rows (the same generator; {check_mib:.0f} MiB would be "
        "one (N, K) float64 array of probabilities), `fit` growth by settings:",
        "",
        "| max_epochs | n_init | growth (MiB) | time (s) |",
        "|---:|---:|---:|---:|",
        *(f"| {e} | {i} | {g:.0f} | {t:.1f} |" for e, i, g, t in checks),
        "",
        f"3 epochs instead of 1: {round(checks[1][2] - checks[0][2]):+d} MiB. 3 restarts "
        f"instead of 1: {round(checks[2][2] - checks[0][2]):+d} MiB, "
        f"{(checks[2][2] - checks[0][2]) / check_mib:.2f} (N, K) arrays' worth. A restart "
        "keeps its labels and score, not its probabilities; growth beyond that is the "
        "pseudo-label solves' working memory (the restarts' solves run side by side, and "
        "a later batch may need wider supports than the first epoch's).",
    ]
    return publish(args.section, "\n".join(lines), args, args.output, echo=True)


if __name__ == "__main__":
    sys.exit(main())
