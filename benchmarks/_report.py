"""Shared helpers of the benchmark scripts: the machine description and docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def machine_lines(devices=("cpu",), extra=()):
    """Markdown bullet lines describing this machine (platform, CPU, torch, devices, GPU)."""
    lines = [
        f"- platform: {platform.platform()}, Python {platform.python_version()}",
        f"- CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, "
        f"torch threads {torch.get_num_threads()}",
        f"- torch {torch.__version__}" + "".join(f", {e}" for e in extra),
        f"- devices: {', '.join(devices)}",
    ]
    if torch.cuda.is_available():
        lines.append(f"- GPU: {torch.cuda.get_device_name(0)}")
    return lines


def apply_threads(threads):
    """``--threads``: "default" leaves torch's and the BLAS/OpenMP pools' counts alone,
    a number sets them all for the process. Returns the words for the table and the suffix
    of the section's name ("" or ``_threads<n>``)."""
    if threads == "default":
        return "torch's default", ""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(int(threads))
    threadpool_limits(int(threads))
    return f"{threads}", f"_threads{threads}"


def update_section(name, body, path=DOC):
    """Replace (or append) the section ``name`` of ``path`` atomically, keeping the rest."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    section = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def publish(name, body, args, path=DOC, echo=False):
    """The end of every benchmark script: print the section ``body`` when ``echo``, and write
    it as the section ``name`` of ``path`` unless ``--no-write``. Returns the exit status 0."""
    if echo:
        print()
        print(body)
    if not args.no_write:
        update_section(name, body, path)
        if echo:
            print(f"\nupdated {path}")
    return 0
