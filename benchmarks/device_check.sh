#!/usr/bin/env bash
# One short device check (issue 14, item 5): the CUDA tests and the GPU rows of the solver,
# fit, growth (bench_scale) and feature benchmarks, in well under 10 minutes on one GPU.
# Tables and logs go to $OUT (the device machine's output folder) or, when unset,
# benchmarks/device_out/.
# On a machine without CUDA it prints "no CUDA device" and exits 0.
#
#   bash benchmarks/device_check.sh
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUTDIR=${OUT:-benchmarks/device_out}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "device_check: no CUDA device (torch.cuda.is_available() is False): nothing to check"
    exit 0
fi
mkdir -p "$OUTDIR"
"$PY" -c "import torch; print('device_check:', torch.cuda.get_device_name(0), torch.__version__)" \
    | tee "$OUTDIR/device.txt"
status=0

echo "== CUDA tests (pytest -m cuda)"
timeout 120 "$PY" -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUTDIR/pytest_cuda.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== solver on CUDA (solve_pseudo_labels: compiled kernels on the host vs torch on the device)"
timeout 90 "$PY" - <<'PYEOF' 2>&1 | tee "$OUTDIR/solver_cuda.md"
import time
import torch
from skcce.solvers import _compiled, solve_pseudo_labels

print("| N | K | lam | data on | path | time (ms) | n_iter | certified |")
print("|---|---|---|---|---|---|---|---|")
for n, k in [(250, 10), (250, 20), (4096, 100)]:
    g = torch.Generator().manual_seed(1)
    P = torch.softmax(3 * torch.randn(n, k, generator=g, dtype=torch.float64), dim=1)
    for device in ("cpu", "cuda"):
        for compiled in (True, False):
            Q = P.to(device)
            with _compiled.using(compiled):
                solve_pseudo_labels(Q, lam=100.0)  # warm-up
                best = float("inf")
                for _ in range(3):
                    if device == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    res = solve_pseudo_labels(Q, lam=100.0, tol=1e-6)
                    if device == "cuda":
                        torch.cuda.synchronize()
                    best = min(best, time.perf_counter() - t0)
            path = "compiled (host)" if compiled else "torch"
            print(f"| {n} | {k} | 100 | {device} | {path} | {1e3 * best:.1f} | {res.n_iter} "
                  f"| {res.converged} |")
PYEOF
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== fit on CUDA (bench_vs_kmeans, digits, 1 seed, CCEClustering on cuda)"
timeout 90 "$PY" benchmarks/bench_vs_kmeans.py --seeds 1 --no-fashion --no-write --device cuda 2>&1 \
    | tee "$OUTDIR/fit_cuda.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== growth on CUDA (bench_scale: CCEClustering on cuda beside KMeans, n 1e4, 1e5; K 10, 100)"
# issue 45 item 5: a bounded corner of bench_scale's grid (every cell in its own process, fits
# cut at 30 s, no new cell after 90 s); the records stay in $OUTDIR, the docs are not touched.
timeout 150 "$PY" benchmarks/bench_scale.py --device cuda --n 10000,100000 --d 64 --k 10,100 \
    --datasets balanced --no-fashion --methods cce_fit,cce_partial,kmeans --cell-timeout 30 \
    --budget-min 1.5 --records "$OUTDIR/scale_records.json" --no-write 2>&1 \
    | tee "$OUTDIR/scale_cuda.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== features on CUDA (bench_features, tiny model)"
timeout 60 "$PY" benchmarks/bench_features.py --model test_resnet --n-images 256 \
    --files 200 --output "$OUTDIR/features.md" 2>&1 | tee "$OUTDIR/features.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== VGG-4 with nothing but max_epochs=10 on CUDA (bench_deep --rows defaults, 3 seeds)"
# issue 12's target; one such fit takes hours on 2 CPU cores. Needs Fashion-MNIST: Debian's
# package, or the IDX files under $SKCCE_DATA/FashionMNIST/raw/ (carry them to the device).
if "$PY" -c "from skcce.datasets import load_dataset; load_dataset('fashion-mnist')" \
    >/dev/null 2>&1; then
    timeout 120 "$PY" benchmarks/bench_deep.py --rows defaults --defaults-epochs 10 \
        --seeds 3 --device cuda --no-write 2>&1 | tee "$OUTDIR/deep_defaults_cuda.md"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
    echo "Fashion-MNIST not found (set SKCCE_DATA): VGG-4 row skipped" \
        | tee "$OUTDIR/deep_defaults_cuda.md"
fi

echo "device_check: done (status $status); tables in $OUTDIR"
exit $status
