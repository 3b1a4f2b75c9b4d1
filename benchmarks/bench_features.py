"""Benchmark FeatureExtractor: throughput against a bare timm forward, and bounded memory.

1. **Throughput.** Images per second of ``FeatureExtractor.transform`` against a bare timm
   forward of the same model (eval, ``torch.inference_mode``, channels-last) on the same
   pre-batched float tensors, in one run, on the CPU and (where available) on CUDA. The ratio
   should be >= 0.9: preprocessing and copies add little to the forward pass.
2. **Memory.** Peak resident memory (``ru_maxrss``) of a fresh process that transforms a folder
   of 1 000 and of 10 000 small PNG files (written to a temporary folder): the growth while
   transforming is bounded by the batch, not by the number of files.

Run ``python benchmarks/bench_features.py --threads 1`` (about two minutes on two shared CPU
cores; ``--threads 1`` keeps a contended OpenMP pool from stalling). It prints a
markdown table and rewrites its own section of ``docs/benchmarks.md``, between the markers
``<!-- bench_features:start -->`` and ``<!-- bench_features:end -->``; other sections are kept.
No weights are downloaded (``pretrained=False``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skcce._feature_extraction import FeatureExtractor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import machine_lines, publish  # noqa: E402


# ---------------------------------------------------------------------------------------------
# 1. throughput
# ---------------------------------------------------------------------------------------------
def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def throughput(model_name, n_images, batch_size, image_size, device, repeats):
    """Best-of-``repeats`` images/s of FeatureExtractor.transform and of a bare timm forward."""
    rng = np.random.default_rng(0)
    X = rng.random((n_images, 3, image_size, image_size), dtype=np.float32)  # [0, 1], NCHW
    extractor = FeatureExtractor(
        model_name, pretrained=False, image_size=image_size, batch_size=batch_size, device=device
    ).fit(X[:1])
    model = extractor.model_  # the same module: eval, frozen, channels-last, on device
    batches = [torch.from_numpy(X[i : i + batch_size]) for i in range(0, n_images, batch_size)]

    def bare():
        outputs = []
        with torch.inference_mode():
            for batch in batches:
                x = batch.to(device, non_blocking=True)
                outputs.append(model(x.contiguous(memory_format=torch.channels_last)).cpu())
        return torch.cat(outputs)

    def ours():
        return extractor.transform(X)

    ours_times, bare_times = [], []
    extractor.transform(X[:batch_size])  # warm up both paths (allocator, kernels)
    with torch.inference_mode():
        bare_out = model(torch.from_numpy(X[:batch_size]).to(device))
    for _ in range(repeats):  # interleaved, so background load hits both alike
        for fn, times in ((ours, ours_times), (bare, bare_times)):
            _sync(device)
            start = time.perf_counter()
            out = fn()
            _sync(device)
            times.append(time.perf_counter() - start)
    assert out.shape == (n_images, bare_out.shape[1])
    return n_images / min(ours_times), n_images / min(bare_times)


# ---------------------------------------------------------------------------------------------
# 2. memory
# ---------------------------------------------------------------------------------------------
_CHILD = r"""
import json, os, sys, threading, time
import torch
torch.set_num_threads({threads})
sys.path.insert(0, {root!r})
from skcce._feature_extraction import FeatureExtractor
from skcce.cli.cluster import find_images

PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20

def rss_mib():  # current resident set size, from /proc (Linux)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MIB

paths = find_images({folder!r})[: {n_files}]
extractor = FeatureExtractor({model!r}, pretrained=False, image_size={size}, batch_size={bs},
                             device="cpu", num_workers={workers})
extractor.fit(paths)
extractor.transform(paths[: {bs}])  # warm up: allocator and first batch buffers
before = rss_mib()
peak = [before]
done = threading.Event()

def sample():
    while not done.wait(0.005):
        peak[0] = max(peak[0], rss_mib())

thread = threading.Thread(target=sample, daemon=True)
thread.start()
start = time.perf_counter()
features = extractor.transform(paths)
seconds = time.perf_counter() - start
done.set()
thread.join()
peak[0] = max(peak[0], rss_mib())
print(json.dumps(dict(n=len(paths), before=before, peak=peak[0], seconds=seconds,
                      shape=list(features.shape))))
"""


def write_pngs(folder, n_files, size, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n_files):
        sub = Path(folder) / f"{i // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(sub / f"{i:06d}.png", compress_level=1)


def peak_memory(folder, n_files, model, size, batch_size, workers):
    code = _CHILD.format(
        root=str(ROOT), folder=str(folder), n_files=n_files, model=model, size=size,
        bs=batch_size, workers=workers, threads=torch.get_num_threads(),
    )  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def machine_description(devices):
    import timm

    return machine_lines(devices, extra=(f"timm {timm.__version__}",))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--n-images", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--memory-model", default="test_resnet")
    parser.add_argument("--memory-batch-size", type=int, default=64)
    parser.add_argument("--memory-image-size", type=int, default=16, help="model input, px")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice); 1 gives stable figures on a busy "
        "shared machine, where a contended OpenMP pool can stall",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for device in devices:
        n = args.n_images if device == "cpu" else max(args.n_images, 1024)
        ours, bare = throughput(
            args.model, n, args.batch_size, args.image_size, device, args.repeats
        )
        rows.append((device, n, ours, bare))
        print(f"[throughput] {device}: FeatureExtractor {ours:.1f} img/s, bare {bare:.1f} img/s")

    memory = []
    with tempfile.TemporaryDirectory(prefix="bench_features_") as folder:
        start = time.perf_counter()
        write_pngs(folder, max(args.files), 32)
        print(f"[memory] wrote {max(args.files)} PNGs in {time.perf_counter() - start:.1f} s")
        for n_files in sorted(args.files):
            result = peak_memory(
                folder,
                n_files,
                args.memory_model,
                args.memory_image_size,
                args.memory_batch_size,
                workers=0,
            )
            memory.append(result)
            print(f"[memory] {result}")

    date = datetime.date.today().isoformat()
    lines = [
        "## FeatureExtractor (`benchmarks/bench_features.py`)",
        "",
        f"Measured {date} by `{' '.join(['python', 'benchmarks/bench_features.py', *argv])}`.",
        "",
        *machine_description(devices),
        "",
        f"**Throughput**: {args.model} at {args.image_size} px, `pretrained=False`, batch size "
        f"{args.batch_size}; float32 `(N, 3, H, W)` inputs in [0, 1]. *Bare timm* is the same "
        "module's forward (eval, `inference_mode`, channels-last) on the same pre-batched "
        "tensors; `FeatureExtractor.transform` adds the resize/crop/normalise preprocessing and "
        f"copies. Best of {args.repeats} interleaved runs.",
        "",
        "| device | images | FeatureExtractor (img/s) | bare timm (img/s) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for device, n, ours, bare in rows:
        lines.append(f"| {device} | {n} | {ours:.1f} | {bare:.1f} | {ours / bare:.2f}x |")
    lines += [
        "",
        f"**Memory**: RSS of a fresh process transforming a folder of 32x32 PNG files "
        f"({args.memory_model} at {args.memory_image_size} px, batch size "
        f"{args.memory_batch_size}, `num_workers=0`, read "
        "lazily batch by batch), sampled from `/proc/self/statm` every 5 ms. *Before* is the "
        "RSS after loading the model and one warm-up batch; *growth* is the peak while "
        "transforming the whole folder minus *before*; it includes the `(N, n_features)` float32 "
        "output, which is the only part that grows with the number of files.",
        "",
        "| files | RSS before (MiB) | peak RSS during transform (MiB) | growth (MiB) "
        "| of which output (MiB) | img/s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for m in memory:
        growth = m["peak"] - m["before"]
        output = m["shape"][0] * m["shape"][1] * 4 / 2**20
        lines.append(
            f"| {m['n']} | {m['before']:.0f} | {m['peak']:.0f} | {growth:.1f} | {output:.1f} "
            f"| {m['n'] / m['seconds']:.0f} |"
        )
    return publish("bench_features", "\n".join(lines), args, args.output, echo=True)


if __name__ == "__main__":
    sys.exit(main())
