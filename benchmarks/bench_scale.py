"""Growth with n, d and K: CCEClustering against KMeans, MiniBatchKMeans and faiss (issue 45).

Grid: n in {10^4, 10^5, 10^6}, d in {64, 256}, K in {10, 100, 1000}, on two Gaussian mixtures of
our own (``make_mixture``: K centres drawn from N(0, spread^2 I_d), spread 0.5 unless
``--spread``, unit noise, float32, generated from ``--seed``), one with balanced clusters and
one with Zipf sizes (size proportional to 1/rank on top of ``--min-size`` rows per cluster,
5 unless told), and Fashion-MNIST's 70 000 images as raw pixels over-clustered at K = 100 (NMI;
the row is skipped when the data is not installed).

Methods (``--methods``, comma-separated; all by default, all fitted in the same run):

- ``cce_fit``: ``CCEClustering(n_clusters=K, random_state=seed, device=...)``, otherwise its
  defaults;
- ``cce_partial``: the same estimator's ``partial_fit`` over 10 chunks of the rows, 2 passes,
  then ``predict`` on all rows ("not available" while CCEClustering has no ``partial_fit``);
- ``kmeans``: ``KMeans(n_clusters=K, n_init=1, random_state=seed)``, the reference of the
  ratios;
- ``minibatch``: ``MiniBatchKMeans(n_clusters=K, random_state=seed)`` (defaults);
- ``minibatch_partial``: its ``partial_fit`` over the same 10 chunks, 2 passes, then
  ``predict``;
- ``faiss``: ``faiss.Kmeans(d, K, seed=seed)`` (default ``niter``, and faiss's default
  subsample of 256 rows per centroid), ``train`` then a search for every row's centroid.

Measurement. Every cell (data, n, d, K, method) runs in a fresh Python process: it imports only
what the method needs, generates (or loads) the data, fits a small warm-up problem of the same
method (one-time costs of a process are not a fit's), then reads its peak resident memory so
far (``VmHWM`` of ``/proc/self/status``, the "baseline", which holds the interpreter, the
libraries and the data; ``getrusage``'s ``ru_maxrss`` is not used where ``/proc`` exists,
because on Linux it keeps the mark of the forking parent across ``exec``) and times the fit
plus the labels of all n rows. "peak RSS" is the process's high-water mark after the fit,
"peak - data" that minus the baseline. Accuracy is
:func:`skcce.metrics.clustering_accuracy` (Hungarian matching), NMI scikit-learn's. A fit that
runs past ``--cell-timeout`` seconds is killed and recorded as "> limit"; a cell whose smaller
neighbour (same data and method, n, d and K each no larger) hit the limit is not run and is
recorded as "> limit (inferred)" unless ``--no-infer``. Threads: torch's (and OpenMP's) default
unless ``--threads N``, which sets torch, OpenMP, MKL and OpenBLAS to N threads in every cell.

Records (one JSON object per cell) are written after every cell to ``--records`` (default:
``bench_scale_records.json`` in the system temporary folder), so that a long grid runs in
pieces: ``--resume`` skips the cells already recorded, ``--rerun`` (with ``--methods``) runs
the selected methods' cells again and overwrites their records. The page is drawn from every
record of the file: a section of ``docs/scale.md`` (markers ``<!-- bench_scale:start -->`` and
``<!-- bench_scale:end -->``) with the tables, the ratios to KMeans(n_init=1) in the same run,
the fitted growth exponents (least squares on log-log, one intercept per group of the other
factors, over the cells that ran), the machine and the commands, and the plot
``docs/_static/scale.png``; ``--no-write`` prints the section only, ``--report-only`` redraws
it from the records without running anything.

Usage::

    python benchmarks/bench_scale.py --quick --no-write          # <= 5 minutes
    python benchmarks/bench_scale.py --resume                      # the whole grid, in pieces
    python benchmarks/bench_scale.py --methods cce_fit,cce_partial --resume --rerun
    python benchmarks/bench_scale.py --device cuda --n 10000 --k 10,100 --no-write
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGE = ROOT / "docs" / "scale.md"
PLOT = ROOT / "docs" / "_static" / "scale.png"
TITLE = "# Scale: growth with n, d and K"
SECTION = "bench_scale"

METHODS = ("cce_fit", "cce_partial", "kmeans", "minibatch", "minibatch_partial", "faiss")
LABELS = {
    "cce_fit": "CCEClustering.fit",
    "cce_partial": "CCEClustering.partial_fit",
    "kmeans": "KMeans(n_init=1)",
    "minibatch": "MiniBatchKMeans",
    "minibatch_partial": "MiniBatchKMeans.partial_fit",
    "faiss": "faiss.Kmeans",
}
CCE_METHODS = ("cce_fit", "cce_partial")
REFERENCE = "kmeans"
DATASETS = ("balanced", "zipf")
FASHION = "fashion-mnist"
FASHION_SHAPE = (70000, 784)
FASHION_K = 100
GRID = {"n": (10_000, 100_000, 1_000_000), "d": (64, 256), "k": (10, 100, 1000)}
QUICK = {"n": (10_000, 30_000), "d": (64,), "k": (10, 30)}
N_CHUNKS, N_PASSES = 10, 2
SPREAD, MIN_SIZE = 0.5, 5
SETUP_LIMIT_S = 600.0  # imports, data and warm-up of one cell (the fit has --cell-timeout)
MIB = 2.0**20


# ----- pure helpers (tested in tests/test_bench_scale.py) ------------------------------------
def cluster_sizes(n, k, kind="balanced", min_size=MIN_SIZE):
    """Sizes of the ``k`` clusters of ``n`` rows, largest first, summing to ``n``.

    ``"balanced"``: ``n // k`` each, the remainder spread one row each over the first clusters.
    ``"zipf"``: ``min_size`` rows each (fewer when ``n`` is too small for that, but at least
    one), the rest shared in proportion to 1/rank (largest remainders), so that size decreases
    with rank and no cluster is empty.
    """
    n, k = int(n), int(k)
    if k < 1 or n < k:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if kind == "balanced":
        sizes = np.full(k, n // k, dtype=np.int64)
        sizes[: n % k] += 1
        return sizes
    if kind != "zipf":
        raise ValueError(f"kind must be 'balanced' or 'zipf', got {kind!r}")
    base = max(1, min(int(min_size), n // k))
    rest = n - base * k
    share = rest * (1.0 / np.arange(1, k + 1)) / np.sum(1.0 / np.arange(1, k + 1))
    extra = np.floor(share).astype(np.int64)
    short = rest - int(extra.sum())
    extra[np.argsort(-(share - extra), kind="stable")[:short]] += 1
    return np.sort(base + extra)[::-1].copy()


def mixture_labels(n, k, kind="balanced", seed=0, min_size=MIN_SIZE):
    """The labels of :func:`make_mixture`, without the features (int64, shuffled)."""
    sizes = cluster_sizes(n, k, kind, min_size)
    labels = np.repeat(np.arange(k, dtype=np.int64), sizes)
    return np.random.default_rng([int(seed), 1]).permutation(labels)


def make_mixture(n, d, k, kind="balanced", seed=0, spread=SPREAD, min_size=MIN_SIZE,
                 chunk=65536):
    """A float32 Gaussian mixture: ``k`` centres from N(0, spread^2 I_d), unit noise.

    Returns ``X`` (n, d) float32 and ``y`` (n,) int64. The rows are generated in chunks into
    one preallocated array, so that the peak memory of generation is the array plus a chunk.
    """
    y = mixture_labels(n, k, kind, seed, min_size)
    rng = np.random.default_rng([int(seed), 2])
    centres = (spread * rng.standard_normal((k, d))).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        X[start:stop] = rng.standard_normal((stop - start, d), dtype=np.float32)
        X[start:stop] += centres[y[start:stop]]
    return X, y


def fit_exponent(groups, xs, ys):
    """Least-squares slope of log y on log x with one intercept per group.

    Points with a non-positive x or y are dropped, and so are groups with fewer than two
    distinct x. Returns ``(slope, n_points)``; the slope is NaN when nothing is left.
    """
    by_group = {}
    for g, x, y in zip(groups, xs, ys, strict=True):
        if x is None or y is None or not (x > 0 and y > 0):
            continue
        by_group.setdefault(g, []).append((math.log(x), math.log(y)))
    sxx = sxy = 0.0
    used = 0
    for pts in by_group.values():
        lx = np.array([p[0] for p in pts])
        if len(np.unique(lx)) < 2:
            continue
        ly = np.array([p[1] for p in pts])
        lx, ly = lx - lx.mean(), ly - ly.mean()
        sxx += float(lx @ lx)
        sxy += float(lx @ ly)
        used += len(pts)
    return (sxy / sxx if sxx > 0 else float("nan")), used


def cell_key(cell):
    """The identity of a cell in the records file."""
    threads = "default" if cell["threads"] is None else cell["threads"]
    return (f"{cell['dataset']}|n={cell['n']}|d={cell['d']}|k={cell['k']}|{cell['method']}"
            f"|{cell['device']}|threads={threads}")


def priority(cell, n_values, d_values):
    """Order of the grid: every n up to 10^5 first; then the largest n at the smallest d and
    K up to 100, and Fashion-MNIST; then the rest. Small cells first inside each tier."""
    n, d, k = cell["n"], cell["d"], cell["k"]
    if cell["dataset"] == FASHION:
        tier = 1
    elif n <= 100_000:
        tier = 0
    elif d == min(d_values) and k <= 100:
        tier = 1
    else:
        tier = 2
    data = (DATASETS + (FASHION,)).index(cell["dataset"])
    return (tier, n, k, d, data, METHODS.index(cell["method"]))


def dominated_by_timeout(cell, records, limit_s):
    """A recorded cell that hit a limit of at least ``limit_s`` seconds and is no larger than
    ``cell`` (same data, method, device and threads; n, d and K each no larger), or None."""
    for rec in records.values():
        if rec.get("status") != "timeout" or rec.get("limit_s", 0) < limit_s:
            continue
        if any(rec[f] != cell[f] for f in ("dataset", "method", "device", "threads")):
            continue
        if rec["n"] <= cell["n"] and rec["d"] <= cell["d"] and rec["k"] <= cell["k"]:
            return rec
    return None


# ----- one cell, in its own process ------------------------------------------------------------
def _maxrss_mib():
    """This process's peak resident memory (MiB): ``VmHWM`` of ``/proc/self/status``, which
    starts afresh at ``exec``; ``getrusage``'s ``ru_maxrss`` where there is no ``/proc`` (on
    Linux it keeps the high-water mark of the process before ``exec``, i.e. of the parent
    that forked it, which here holds torch)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MIB
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / MIB


def _cpu_s():
    """CPU time of this process so far, all threads, user + system (s)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _fit_labels(method, X, k, seed, device):
    """Fit ``method`` on X and return the labels of all rows and the estimator."""
    n = X.shape[0]
    chunks = np.array_split(np.arange(n), N_CHUNKS)
    if method in CCE_METHODS:
        from skcce import CCEClustering

        est = CCEClustering(n_clusters=k, random_state=seed, device=device)
        if method == "cce_fit":
            return est.fit(X).labels_, est
        for _ in range(N_PASSES):
            for idx in chunks:
                est.partial_fit(X[idx[0]: idx[-1] + 1])
        return est.predict(X), est
    if method == "kmeans":
        from sklearn.cluster import KMeans

        est = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X)
        return est.labels_, est
    if method in ("minibatch", "minibatch_partial"):
        from sklearn.cluster import MiniBatchKMeans

        est = MiniBatchKMeans(n_clusters=k, random_state=seed)
        if method == "minibatch":
            return est.fit(X).labels_, est
        for _ in range(N_PASSES):
            for idx in chunks:
                est.partial_fit(X[idx[0]: idx[-1] + 1])
        return est.predict(X), est
    if method == "faiss":
        import faiss

        est = faiss.Kmeans(X.shape[1], k, seed=seed)
        est.train(X)
        _, assign = est.index.search(X, 1)
        return assign[:, 0].astype(np.int64), est
    raise ValueError(f"unknown method {method!r}")


def _load_fashion():
    from skcce.datasets import load_dataset

    X, y = load_dataset(FASHION)
    return X.reshape(len(X), -1).astype(np.float32) / np.float32(255.0), y


def worker(cell):
    """Run one cell in this process; print READY after the setup and RESULT <json> at the end."""
    import warnings

    threads = cell["threads"]
    method = cell["method"]
    result = {}
    if method in CCE_METHODS or cell["device"] != "cpu":
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        result["torch_threads"] = torch.get_num_threads()
    if method == "faiss":
        import faiss

        if threads is not None:
            faiss.omp_set_num_threads(int(threads))
    from sklearn.metrics import normalized_mutual_info_score

    from skcce.metrics import clustering_accuracy

    t0 = time.perf_counter()
    if cell["dataset"] == FASHION:
        X, y = _load_fashion()
    else:
        X, y = make_mixture(cell["n"], cell["d"], cell["k"], cell["dataset"], cell["seed"],
                            cell["spread"], cell["min_size"])
    result["data_s"] = time.perf_counter() - t0
    result["data_mib"] = X.nbytes / MIB
    device = cell["device"]
    # warm-up: the same method on a small problem (loads kernels, JIT caches, thread pools)
    kw = min(cell["k"], 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit_labels(method, X[: max(40 * kw, 1000)], kw, cell["seed"], device)
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    result["baseline_mib"] = _maxrss_mib()
    print("READY", flush=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c0, t0 = _cpu_s(), time.perf_counter()
        labels, est = _fit_labels(method, X, cell["k"], cell["seed"], device)
        result["time_s"] = time.perf_counter() - t0
        result["cpu_s"] = _cpu_s() - c0
    result["peak_rss_mib"] = _maxrss_mib()
    result["peak_minus_data_mib"] = result["peak_rss_mib"] - result["baseline_mib"]
    if device == "cuda":
        import torch

        result["cuda_peak_mib"] = torch.cuda.max_memory_allocated() / MIB
    if method in CCE_METHODS:
        result["device_used"] = str(getattr(est, "device_", device))
    labels = np.asarray(labels)
    result["nmi"] = float(normalized_mutual_info_score(y, labels))
    if cell["dataset"] != FASHION:
        result["acc"] = float(clustering_accuracy(y, labels))
    result["n_empty"] = int(cell["k"] - len(np.unique(labels)))
    msgs = []
    for w in caught:
        text = f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
        if text not in msgs:
            msgs.append(text)
    result["warnings"] = msgs[:3]
    result["status"] = "ok"
    print("RESULT " + json.dumps(result), flush=True)


def run_cell(cell, limit_s, log):
    """Run ``cell`` in a fresh process under the limits; return its record fields. The
    process's standard error is appended to ``log``; its last line is the note of a failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    if cell["threads"] is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(cell["threads"])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cell)]
    with tempfile.TemporaryFile("w+") as err:
        out = _watch(cmd, env, err, limit_s)
        err.seek(0)
        text = err.read()
    log.write(text)
    log.flush()
    if out["status"] == "error" and "note" not in out:
        last = [ln for ln in text.splitlines() if ln.strip()]
        out["note"] = last[-1][:300] if last else "no message"
    return out


def _watch(cmd, env, err, limit_s):
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                            cwd=str(ROOT))
    deadline = start + SETUP_LIMIT_S
    phase, ready_at = "setup", start
    result = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.kill()
                proc.wait()
                if phase == "fit":
                    return {"status": "timeout", "limit_s": limit_s,
                            "setup_s": ready_at - start}
                return {"status": "error", "note": f"setup ran past {SETUP_LIMIT_S:.0f} s"}
            ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 5.0))
            if not ready:
                continue
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("READY"):
                phase, ready_at = "fit", time.monotonic()
                deadline = ready_at + limit_s
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if result is None:
        return {"status": "error", "exit_status": proc.returncode}
    result["limit_s"] = limit_s
    result["setup_s"] = ready_at - start
    return result


def skcce_version():
    """The checkout's commit, ``+dirty`` when it has uncommitted changes, or None."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty=+dirty"], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


# ----- records ----------------------------------------------------------------------------------
def default_records():
    return str(Path(tempfile.gettempdir()) / "bench_scale_records.json")


def load_records(path):
    path = Path(path)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def save_records(records, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
    os.replace(tmp, path)


def shown_command(argv, records_path):
    """The command as the page shows it: the records file under the temporary folder is
    written ``$TMPDIR/...`` (the path differs between machines)."""
    tmp = tempfile.gettempdir()
    out = []
    for a in argv:
        if a.startswith(tmp + os.sep):
            a = "$TMPDIR" + a[len(tmp):]
        out.append(a)
    return "python benchmarks/bench_scale.py" + "".join(
        " " + (a if a.startswith("$TMPDIR") else shlex.quote(a)) for a in out)


def build_cells(args, fashion_present):
    cells = []
    base = dict(device="cpu", threads=args.threads, seed=args.seed, spread=args.spread,
                min_size=args.min_size)
    for method in args.methods:
        device = args.device if method in CCE_METHODS else "cpu"
        for dataset in args.datasets:
            for n in args.n:
                for d in args.d:
                    for k in args.k:
                        if k > n:
                            continue
                        cells.append(dict(base, dataset=dataset, n=n, d=d, k=k,
                                          method=method, device=device))
        if args.fashion:
            n, d = FASHION_SHAPE
            cells.append(dict(base, dataset=FASHION, n=n, d=d, k=FASHION_K, method=method,
                              device=device, present=fashion_present))
    cells.sort(key=lambda c: priority(c, args.n, args.d))
    return cells


def fashion_available():
    try:
        from skcce.datasets import load_dataset

        load_dataset(FASHION, split="test")
    except (FileNotFoundError, OSError, ValueError):
        return False
    return True


def should_skip(rec, args):
    """Whether ``--resume`` keeps the recorded ``rec`` instead of running its cell again."""
    if rec is None or not args.resume:
        return False
    if args.rerun:
        return False
    if rec["status"] == "ok":
        return True
    if rec["status"] in ("timeout", "inferred"):
        return rec.get("limit_s", 0) >= args.cell_timeout
    return False  # not available / error / absent: try again


# ----- the page ---------------------------------------------------------------------------------
def _fmt(x, spec=".3g"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return format(x, spec)


def _threads_label(rec):
    return "default" if rec["threads"] is None else str(rec["threads"])


def _time_cell(rec):
    st = rec["status"]
    if st == "ok":
        return _fmt(rec["time_s"], ".3g")
    if st == "timeout":
        return f"> {rec['limit_s']:.0f} (limit)"
    if st == "inferred":
        return f"> {rec['limit_s']:.0f} (inferred)"
    if st == "na":
        return "not available"
    if st == "absent":
        return "data absent"
    return "error"


def _reference(rec, records):
    for other in records.values():
        if (other["method"] == REFERENCE and other["status"] == "ok"
                and all(other[f] == rec[f] for f in ("dataset", "n", "d", "k", "threads"))):
            return other
    return None


def cells_table(recs, records, with_acc=True):
    head = ["n", "d", "K", "method", "device", "threads", "time (s)", "CPU (s)",
            "× KMeans time"]
    if with_acc:
        head += ["acc", "acc − KMeans"]
    head += ["NMI", "empty", "peak RSS (MiB)", "peak − data (MiB)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in recs:
        ref = _reference(rec, records)
        ok = rec["status"] == "ok"
        ratio = rec["time_s"] / ref["time_s"] if ok and ref else None
        row = [f"{rec['n']:,}", str(rec["d"]), str(rec["k"]), LABELS[rec["method"]],
               rec.get("device_used", rec["device"]) if ok else rec["device"],
               _threads_label(rec), _time_cell(rec), _fmt(rec.get("cpu_s") if ok else None),
               _fmt(ratio, ".2f")]
        if with_acc:
            dacc = rec["acc"] - ref["acc"] if ok and ref and "acc" in rec else None
            row += [_fmt(rec.get("acc") if ok else None, ".3f"), _fmt(dacc, "+.3f")]
        row += [_fmt(rec.get("nmi") if ok else None, ".3f"),
                str(rec["n_empty"]) if ok else "—",
                _fmt(rec.get("peak_rss_mib") if ok else None, ".0f"),
                _fmt(rec.get("peak_minus_data_mib") if ok else None, ".0f")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def exponents(records):
    """Per (method, device, threads): growth exponents fitted on the cells that ran."""
    out = []
    ok = [r for r in records.values() if r["status"] == "ok" and r["dataset"] != FASHION]
    variants = sorted({(r["method"], r["device"], _threads_label(r)) for r in ok},
                      key=lambda v: (METHODS.index(v[0]), v[1], v[2]))
    for method, device, threads in variants:
        rs = [r for r in ok if (r["method"], r["device"], _threads_label(r))
              == (method, device, threads)]
        by_n = [(r["dataset"], r["d"], r["k"]) for r in rs]
        by_k = [(r["dataset"], r["n"], r["d"]) for r in rs]
        n_ = [r["n"] for r in rs]
        t_n = fit_exponent(by_n, n_, [r["time_s"] for r in rs])
        t_k = fit_exponent(by_k, [r["k"] for r in rs], [r["time_s"] for r in rs])
        c_n = fit_exponent(by_n, n_, [r.get("cpu_s") for r in rs])
        c_k = fit_exponent(by_k, [r["k"] for r in rs], [r.get("cpu_s") for r in rs])
        m_n = fit_exponent(by_n, n_, [r["peak_rss_mib"] for r in rs])
        g_n = fit_exponent(by_n, n_, [r["peak_minus_data_mib"] for r in rs])
        out.append((method, device, threads, t_n, t_k, c_n, c_k, m_n, g_n))
    return out


def exponents_table(rows):
    lines = ["| method | device | threads | time ∝ n^b | time ∝ K^b | CPU ∝ n^b | CPU ∝ K^b "
             "| peak RSS ∝ n^b | peak − data ∝ n^b |", "|---|---|---|---|---|---|---|---|---|"]
    for method, device, threads, *fits in rows:
        cells = [f"{_fmt(b, '.2f')} ({m} cells)" for b, m in fits]
        lines.append(f"| {LABELS[method]} | {device} | {threads} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot_slices(recs):
    """(K for time-vs-n, n for time-vs-K) with the most cells that ran, balanced data, small d."""
    ok = [r for r in recs if r["status"] == "ok"]
    if not ok:
        return None
    d0 = min(r["d"] for r in ok)
    ok = [r for r in ok if r["d"] == d0]
    ks = sorted({r["k"] for r in ok})
    ns = sorted({r["n"] for r in ok})
    k0 = max(ks, key=lambda k: (len({r["n"] for r in ok if r["k"] == k}),
                                sum(r["k"] == k for r in ok), -k))
    n0 = max(ns, key=lambda n: (len({r["k"] for r in ok if r["n"] == n}),
                                sum(r["n"] == n for r in ok), n))
    return d0, k0, n0


def plot(records, path):
    """Time vs n and time vs K, log-log, one line per method (balanced mixture)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [r for r in records.values() if r["dataset"] == "balanced"
            and r["status"] in ("ok", "timeout", "inferred")]
    sl = _plot_slices(recs)
    if sl is None:
        return None
    d0, k0, n0 = sl
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    variants = sorted({(r["method"], r["device"], _threads_label(r)) for r in recs},
                      key=lambda v: (METHODS.index(v[0]), v[1], v[2]))
    for i, (method, device, threads) in enumerate(variants):
        label = LABELS[method] + (f" ({device})" if device != "cpu" else "") + (
            f", {threads} thr." if threads != "default" else "")
        color = f"C{i % 10}"
        for ax, fixed, var in ((axes[0], ("k", k0), "n"), (axes[1], ("n", n0), "k")):
            rs = sorted((r for r in recs if (r["method"], r["device"], _threads_label(r))
                         == (method, device, threads) and r["d"] == d0
                         and r[fixed[0]] == fixed[1]), key=lambda r: r[var])
            good = [r for r in rs if r["status"] == "ok"]
            over = [r for r in rs if r["status"] != "ok"]
            if good:
                ax.plot([r[var] for r in good], [r["time_s"] for r in good], "o-",
                        color=color, label=label if ax is axes[0] else None)
            if over:
                ax.plot([r[var] for r in over], [r["limit_s"] for r in over], "^",
                        color=color, markerfacecolor="none", markersize=9)
    axes[0].set(xscale="log", yscale="log", xlabel="n (rows)", ylabel="wall time (s)",
                title=f"time vs n (balanced, d={d0}, K={k0})")
    axes[1].set(xscale="log", yscale="log", xlabel="K (clusters)", ylabel="wall time (s)",
                title=f"time vs K (balanced, d={d0}, n={n0:,})")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    fig.legend(loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.text(0.99, 0.01, "hollow ▲: hit the time limit (plotted at the limit)", ha="right",
             fontsize=7)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return d0, k0, n0


def _sort_key(r):
    return (r["n"], r["d"], r["k"], METHODS.index(r["method"]), r["device"], _threads_label(r))


def report(records, machine, plotted, spread, min_size):
    """The markdown body of the page's section."""
    recs = list(records.values())
    status = {}
    for r in recs:
        status[r["status"]] = status.get(r["status"], 0) + 1
    commands = []
    for r in sorted(recs, key=lambda r: r.get("when", "")):
        if r.get("command") and r["command"] not in commands:
            commands.append(r["command"])
    loads = [r["load_avg"] for r in recs if r.get("load_avg") is not None]
    when = sorted(r.get("when", "") for r in recs if r.get("when"))
    out = [
        "## Growth curves: CCEClustering, KMeans, MiniBatchKMeans and faiss "
        "(`benchmarks/bench_scale.py`)",
        "",
        "Gaussian mixtures of our own (`make_mixture` in the script): K centres drawn from "
        f"N(0, {spread}² I_d), unit noise, float32, seed 0; **balanced** clusters, and "
        f"**Zipf** sizes (∝ 1/rank on top of {min_size} rows each). Every cell (data, n, d, K, "
        "method) ran in a fresh process; time is the fit plus the labels of all n rows "
        "(after a small warm-up fit of the same method in the same process); \"peak RSS\" is "
        "the process's high-water mark (`VmHWM`), \"peak − data\" that minus the mark "
        "after the imports, the data and the warm-up. Accuracy: Hungarian matching "
        "(`skcce.metrics.clustering_accuracy`); \"empty\": clusters with no row; ratios and "
        "differences are against KMeans(n_init=1) on the same cell of the same records. "
        "`partial_fit` rows: 10 chunks × 2 passes, then `predict`. faiss.Kmeans: default "
        "`niter` (25) and its default subsample of 256 rows per centroid.",
        "",
        f"Cells recorded: {len(recs)} — " + ", ".join(
            f"{v} {_STATUS_WORDS.get(k, k)}" for k, v in sorted(status.items())) + ".",
        "",
    ]
    if plotted:
        d0, k0, n0 = plotted
        out += [f"![Wall time against n (d = {d0}, K = {k0}) and against K (d = {d0}, "
                f"n = {n0:,}), log-log, balanced mixture](_static/scale.png)", ""]
    out += ["### Growth exponents", "",
            "Least squares of log(time) on log(n) (and on log(K)), one intercept per group of "
            "the other factors (data kind, d, and K or n), over the cells that ran; cells past "
            "the limit are left out, so where they exist the true growth is steeper. \"CPU\": "
            "the fitting process's user + system time, all threads (less sensitive than wall "
            "time to other jobs on a shared machine). Peak memory: a cell's peak − data of a "
            "few MiB is within the measurement's noise (allocator caches, page granularity), "
            "so an exponent near or below 0 there means no measurable growth.", "",
            exponents_table(exponents(records)), ""]
    for dataset in DATASETS:
        rs = sorted((r for r in recs if r["dataset"] == dataset), key=_sort_key)
        if rs:
            out += [f"### {dataset.capitalize()} mixture", "", cells_table(rs, records), ""]
    rs = sorted((r for r in recs if r["dataset"] == FASHION), key=_sort_key)
    if rs:
        if all(r["status"] == "absent" for r in rs):
            out += ["### Fashion-MNIST, K = 100", "",
                    "Fashion-MNIST is not installed on this machine (Debian's "
                    "`dataset-fashion-mnist`, or `$SKCCE_DATA`): row skipped.", ""]
        else:
            out += ["### Fashion-MNIST 70 000 × 784 raw pixels, over-clustered at K = 100 (NMI)",
                    "", cells_table(rs, records, with_acc=False), ""]
    limit = sorted((r for r in recs if r["status"] in ("timeout", "inferred")), key=_sort_key)
    if limit:
        out += ["### Cells past the time limit", "",
                "; ".join(f"{r['dataset']} n={r['n']:,} d={r['d']} K={r['k']} "
                          f"{LABELS[r['method']]} ({_RAN[r['status']]})" for r in limit)
                + ".", ""]
    missing = missing_cells(records)
    if missing:
        out += ["### Cells of the grid not run yet", "",
                "Not reached within the time given to these records (CPU, default threads); "
                "`--resume` runs them.", "", missing_table(missing), ""]
    failed = sorted((r for r in recs if r["status"] == "error"), key=_sort_key)
    if failed:
        out += ["### Cells that failed", ""]
        out += [f"- {r['dataset']} n={r['n']:,} d={r['d']} K={r['k']} {LABELS[r['method']]}: "
                f"`{r.get('note', '')}`" for r in failed]
        out += [""]
    warned = sorted((r for r in recs if r.get("warnings")), key=_sort_key)
    if warned:
        out += ["### Warnings during the fits", ""]
        out += [f"- {r['dataset']} n={r['n']:,} d={r['d']} K={r['k']} {LABELS[r['method']]}: "
                + "; ".join(f"`{w}`" for w in r["warnings"]) for r in warned]
        out += [""]
    out += ["### Machine and commands", ""] + machine
    if loads:
        out.append(f"- load average (1 min) at the cells' starts: {min(loads):.1f} to "
                   f"{max(loads):.1f} (a shared machine: other jobs ran beside these cells)")
    if when:
        out.append(f"- recorded {when[0][:16]} to {when[-1][:16]} UTC")
    states = [r["skcce"] for r in sorted(recs, key=lambda r: r.get("when", ""))
              if r.get("skcce")]
    states = [c for i, c in enumerate(states) if c not in states[:i]]
    if states:
        dirty = sum(c.endswith("+dirty") for c in states)
        out.append(f"- skcce checkout: {len(states)} states from `{states[0]}` to "
                   f"`{states[-1]}` ({dirty} with uncommitted changes in the tree; each "
                   "record has its own)")
    out += ["", "```"] + commands + ["```"]
    out += ["", "More of the grid, or the same cells again (all but the CCEClustering rows kept), "
            "into the same records file:", "", "```",
            "python benchmarks/bench_scale.py --resume",
            "python benchmarks/bench_scale.py --methods cce_fit,cce_partial --resume --rerun",
            "```"]
    return "\n".join(out)


_RAN = {"timeout": "ran", "inferred": "inferred"}
_STATUS_WORDS = {
    "ok": "ran",
    "timeout": "hit the time limit",
    "inferred": "not run (a smaller cell of the same method hit the limit)",
    "na": "not available",
    "absent": "data absent",
    "error": "failed",
}


def missing_cells(records):
    """The cells of the whole grid (CPU, default threads, every method, both mixtures and
    Fashion-MNIST) that have no record, grouped: ``[(dataset, n, d, K, [methods])]``."""
    have = {cell_key(r) for r in records.values()}
    out = []
    shapes = [(ds, n, d, k) for ds in DATASETS for n in GRID["n"] for d in GRID["d"]
              for k in GRID["k"]] + [(FASHION, *FASHION_SHAPE, FASHION_K)]
    for ds, n, d, k in shapes:
        missing = [m for m in METHODS if cell_key(dict(dataset=ds, n=n, d=d, k=k, method=m,
                                                       device="cpu", threads=None)) not in have]
        if missing:
            out.append((ds, n, d, k, missing))
    return out


def missing_table(rows):
    lines = ["| data | n | d | K | methods not run |", "|---|---|---|---|---|"]
    for ds, n, d, k, methods in rows:
        names = "all" if len(methods) == len(METHODS) else ", ".join(LABELS[m] for m in methods)
        lines.append(f"| {ds} | {n:,} | {d} | {k} | {names} |")
    return "\n".join(lines)


def ensure_page(path):
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TITLE + "\n")


# ----- command line -----------------------------------------------------------------------------
def _ints(text):
    return tuple(int(float(v)) for v in text.split(",") if v)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"a small grid (n {QUICK['n']}, d {QUICK['d']}, K {QUICK['k']}), "
                   "60 s limit, no Fashion-MNIST: a few minutes")
    p.add_argument("--n", type=_ints, help="rows, comma-separated (default 1e4,1e5,1e6)")
    p.add_argument("--d", type=_ints, help="features (default 64,256)")
    p.add_argument("--k", type=_ints, help="clusters (default 10,100,1000)")
    p.add_argument("--datasets", default="balanced,zipf", help="balanced,zipf")
    p.add_argument("--no-fashion", dest="fashion", action="store_false",
                   help="leave out Fashion-MNIST at K = 100")
    p.add_argument("--methods", default=",".join(METHODS), help=",".join(METHODS))
    p.add_argument("--threads", type=int, default=None,
                   help="torch / OpenMP threads in every cell (default: their defaults)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the CCEClustering rows run")
    p.add_argument("--cell-timeout", type=float, default=None,
                   help="seconds a fit may run (default 300; 60 with --quick)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spread", type=float, default=SPREAD)
    p.add_argument("--min-size", type=int, default=MIN_SIZE)
    p.add_argument("--records", default=None, help="the JSON records file "
                   "(default: bench_scale_records.json in the temporary folder)")
    p.add_argument("--resume", action="store_true", help="skip the cells already recorded")
    p.add_argument("--rerun", action="store_true",
                   help="run the selected cells again even when recorded (with --methods)")
    p.add_argument("--no-infer", dest="infer", action="store_false",
                   help="run cells even when a smaller one of the same method hit the limit")
    p.add_argument("--budget-min", type=float, default=None,
                   help="start no new cell after this many minutes (then write the page)")
    p.add_argument("--report-only", action="store_true", help="draw the page from the records")
    p.add_argument("--no-write", action="store_true", help="print the section only")
    p.add_argument("--page", default=str(PAGE), help=argparse.SUPPRESS)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    grid = QUICK if args.quick else GRID
    args.n = args.n or grid["n"]
    args.d = args.d or grid["d"]
    args.k = args.k or grid["k"]
    if args.quick:
        args.fashion = False
    if args.cell_timeout is None:
        args.cell_timeout = 60.0 if args.quick else 300.0
    args.methods = [m for m in args.methods.split(",") if m]
    args.datasets = [m for m in args.datasets.split(",") if m]
    bad = [m for m in args.methods if m not in METHODS] + [
        m for m in args.datasets if m not in DATASETS]
    if bad:
        p.error(f"unknown method or data set: {bad}; methods {METHODS}, data {DATASETS}")
    if args.records is None:
        args.records = default_records()
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    sys.path.insert(0, str(HERE))
    import torch
    from _report import machine_lines, update_section

    if args.device == "cuda" and not torch.cuda.is_available() and not args.report_only:
        print("bench_scale: no CUDA device (torch.cuda.is_available() is False): "
              "the CCEClustering rows on cuda are not run")
        return 0
    records = load_records(args.records)
    if not args.report_only:
        from skcce import CCEClustering

        has_partial = hasattr(CCEClustering, "partial_fit")
        has_faiss = importlib.util.find_spec("faiss") is not None
        fashion_present = args.fashion and fashion_available()
        cells = build_cells(args, fashion_present)
        command = shown_command(argv, args.records)
        print(f"bench_scale: {len(cells)} cells, records in {args.records}", flush=True)
        log_path = Path(args.records).with_suffix(".log")
        signal.signal(signal.SIGTERM, _interrupt)  # a killed run kills its cell's process too
        stop_at = None if args.budget_min is None else time.monotonic() + 60 * args.budget_min
        fresh = set()
        with open(log_path, "a") as log:
            for i, cell in enumerate(cells):
                if stop_at is not None and time.monotonic() > stop_at:
                    print(f"bench_scale: --budget-min {args.budget_min:g} spent; "
                          f"{len(cells) - i} cells left (run again with --resume)", flush=True)
                    break
                present = cell.pop("present", True)
                key = cell_key(cell)
                if should_skip(records.get(key), args):
                    continue
                rec = dict(cell, key=key, command=command, load_avg=os.getloadavg()[0],
                           when=datetime.datetime.now(datetime.timezone.utc).isoformat())
                # --rerun: only this run's limits say what the code of today cannot do
                known = {k: records[k] for k in fresh} if args.rerun else records
                dom = (dominated_by_timeout(cell, known, args.cell_timeout)
                       if args.infer else None)
                if cell["method"] == "cce_partial" and not has_partial:
                    rec.update(status="na", note="CCEClustering has no partial_fit")
                elif cell["method"] == "faiss" and not has_faiss:
                    rec.update(status="na", note="faiss is not installed (faiss-cpu)")
                elif cell["dataset"] == FASHION and not present:
                    rec.update(status="absent")
                elif dom is not None and dom["key"] != key:
                    rec.update(status="inferred", limit_s=dom["limit_s"], note=dom["key"])
                else:
                    log.write(f"\n=== {key} ({rec['when']})\n")
                    log.flush()
                    rec.update(run_cell(cell, args.cell_timeout, log), skcce=skcce_version())
                records[key] = rec
                fresh.add(key)
                save_records(records, args.records)
                print(f"[{i + 1}/{len(cells)}] {key}: {_time_cell(rec)}"
                      + (" s" if rec["status"] == "ok" else "")
                      + (f" ({rec['note']})" if rec["status"] == "error" else "")
                      + (f", acc {rec['acc']:.3f}" if "acc" in rec else "")
                      + (f", NMI {rec['nmi']:.3f}" if "nmi" in rec else "")
                      + (f", peak {rec['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in rec
                         else ""), flush=True)
    if not records:
        print("bench_scale: no records")
        return 0
    devices = sorted({r.get("device_used", r["device"]) for r in records.values()})
    machine = machine_lines(devices=devices, extra=_versions())
    plotted = None
    if not args.no_write:
        plotted = plot(records, PLOT)
    mix = [r for r in records.values() if r["dataset"] != FASHION] or [vars(args)]
    body = report(records, machine, plotted, mix[0]["spread"], mix[0]["min_size"])
    print()
    print(body)
    if not args.no_write:
        ensure_page(args.page)
        update_section(SECTION, body, args.page)
        print(f"\nupdated {args.page} and {PLOT}")
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _versions():
    import sklearn

    out = [f"scikit-learn {sklearn.__version__}"]
    try:
        import faiss

        out.append(f"faiss {faiss.__version__}")
    except ImportError:
        out.append("faiss not installed")
    return out


if __name__ == "__main__":
    sys.exit(main())
