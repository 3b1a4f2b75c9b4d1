"""benchmarks/device_check.sh on a machine without CUDA: a clear message and exit status 0."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_device_check_without_cuda_says_so_and_exits_0(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path))
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "no CUDA device" in out.stdout
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written
