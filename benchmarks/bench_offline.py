"""Measure how long pretrained weights take to fail when the Hugging Face Hub cannot be reached.

Each case runs in a fresh process with an empty Hugging Face cache (``HF_HOME`` in a temporary
folder). The process imports torch, timm and skcce first (not timed: the import costs the same
online and offline), then times ``FeatureExtractor().fit(one image)`` with the default
``resnet50`` weights until the error. Cases:

* ``no network``: this machine's own network (run it on a machine that cannot reach the Hub;
  a failed name lookup returns at once);
* ``unresponsive endpoint``: ``HF_ENDPOINT`` pointed at a local socket that listens but never
  answers (the connection is made, the request hangs until its timeout), as behind a
  firewall that drops packets;
* ``HF_HUB_OFFLINE=1``.

``--before PATH`` also runs the ``no network`` case against another checkout of skcce (for
example the commit before the change), to compare. The ``skcce cluster`` command is timed end
to end (imports included) on a folder of 4 small images.

Run ``python benchmarks/bench_offline.py [--before PATH]``. It prints a markdown table and
rewrites its own section of ``docs/benchmarks.md`` (markers ``<!-- bench_offline:start -->``
and ``<!-- bench_offline:end -->``).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import machine_lines, publish  # noqa: E402

_CHILD = """
import time, numpy as np, torch
torch.set_num_threads(1)
import timm, skcce
from skcce import FeatureExtractor
start = time.perf_counter()
try:
    FeatureExtractor().fit(np.zeros((1, 32, 32, 3), np.uint8))
    outcome = "loaded"
except Exception as exc:
    outcome = type(exc).__name__
print(f"{time.perf_counter() - start:.2f} {outcome}")
"""


def _env(checkout, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["PYTHONPATH"] = str(checkout)
    env["HF_HOME"] = tempfile.mkdtemp(prefix="bench-offline-hf-")
    env.update(extra)
    return env


def _fit_case(checkout, **extra):
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=tempfile.mkdtemp(prefix="bench-offline-cwd-"),  # `-c` puts the cwd first on sys.path
        env=_env(checkout, **extra),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    line = (done.stdout.strip().splitlines() or ["nan failed"])[-1]
    seconds, outcome = line.split(" ", 1)
    return float(seconds), outcome


def _cli_case(checkout, *extra):
    import numpy as np
    from PIL import Image

    folder = Path(tempfile.mkdtemp(prefix="bench-offline-photos-"))
    for i in range(4):
        Image.fromarray(np.full((16, 16, 3), 60 * i, np.uint8)).save(folder / f"{i}.png")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "skcce", "cluster", str(folder), "-k", "2", "--out", "-", *extra],
        cwd=tempfile.mkdtemp(prefix="bench-offline-cwd-"),
        env=_env(checkout),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    seconds = time.perf_counter() - start
    return seconds, f"exit {done.returncode}: {done.stderr.strip()[:90]}..."


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="another skcce checkout to compare")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rows = []
    if args.before:
        rows.append(("before (`--before`)", "no network", *_fit_case(args.before)))
    rows.append(("this checkout", "no network", *_fit_case(ROOT)))
    with socket.socket() as silent:  # listens, never accepts: requests hang
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        case = _fit_case(ROOT, HF_ENDPOINT=endpoint)
        rows.append(("this checkout", "unresponsive endpoint", *case))
    rows.append(("this checkout", "HF_HUB_OFFLINE=1", *_fit_case(ROOT, HF_HUB_OFFLINE="1")))
    cli_seconds, cli_outcome = _cli_case(ROOT)
    ref_seconds, _ = _cli_case(ROOT, "--weights", "missing.safetensors")
    before = " --before PATH" if args.before else ""

    table = ["| code | network | `FeatureExtractor().fit` until the error (s) | outcome |"]
    table.append("|---|---|---|---|")
    table += [f"| {c} | {n} | {s:.1f} | `{o}` |" for c, n, s, o in rows]
    body = "\n".join(
        [
            "## Pretrained weights offline (`benchmarks/bench_offline.py`)",
            "",
            "Time from `FeatureExtractor().fit(...)` (default resnet50 weights, empty Hugging "
            "Face cache, imports done) to the error; each case in a fresh process. The "
            "unresponsive endpoint was not run against the code before the change (its 60 s "
            "timeouts and retries take minutes).",
            "",
            *table,
            "",
            f"`skcce cluster photos/ -k 2` (default weights, no network), end to end with the "
            f"imports: {cli_seconds:.1f} s, {cli_outcome}. For reference, the same command with "
            f"`--weights missing.safetensors` (the same imports, no network; it stops at the "
            f"missing file): {ref_seconds:.1f} s.",
            "",
            f"Command: `python benchmarks/bench_offline.py{before}`",
            "",
            *machine_lines(),
        ]
    )
    print(body)
    return publish("bench_offline", body, args)


if __name__ == "__main__":
    sys.exit(main())
