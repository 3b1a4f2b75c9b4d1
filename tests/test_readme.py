"""The README's code runs as written (issue 15).

Every fenced ``python`` block of README.md is executed in a fresh namespace, in order. The one
change: ``FeatureExtractor()`` (which downloads resnet50's weights on first use) becomes the
tiny ``FeatureExtractor("test_resnet", pretrained=False, image_size=32, device="cpu")``, so the
test needs no network and takes seconds. Every ``skcce ...`` line of the ``bash`` blocks is
parsed by the real command-line parser, so a flag the README shows exists.
"""

import re
import shlex
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
TINY = 'FeatureExtractor("test_resnet", pretrained=False, image_size=32, device="cpu")'


def _blocks(language):
    return [code for lang, code in FENCE.findall(README.read_text()) if lang == language]


def test_readme_has_python_blocks():
    assert len(_blocks("python")) >= 2


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_block_runs(index):
    code = _blocks("python")[index]
    if "FeatureExtractor()" in code:
        pytest.importorskip("timm")
        code = code.replace("FeatureExtractor()", TINY)
    assert "FeatureExtractor()" not in code
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        exec(compile(code, f"README.md python block {index + 1}", "exec"), {})
    finally:
        torch.set_num_threads(threads)


def _command_lines():
    lines = []
    for code in _blocks("bash"):
        for line in code.splitlines():
            command = line.split("  #")[0].strip()
            for part in command.split("&&"):
                part = part.strip()
                if part.startswith("skcce "):
                    lines.append(part)
    return lines


def test_readme_command_lines_parse():
    from skcce.cli import build_parser

    lines = _command_lines()
    assert any(line.startswith("skcce cluster") for line in lines)
    for line in lines:
        try:
            build_parser().parse_args(shlex.split(line)[1:])
        except SystemExit as exc:  # argparse's way of refusing
            raise AssertionError(f"README command does not parse: {line}") from exc
