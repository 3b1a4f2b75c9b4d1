"""Tests of the ``skcce`` command line (``skcce cluster`` is in test_cli_cluster.py)."""

import subprocess
import sys

import numpy as np
import sklearn.datasets

from skcce.cli import build_parser, main


def test_parser_has_subcommands():
    parser = build_parser()
    assert parser.parse_args(["demo", "--digits-only"]).digits_only
    assert parser.parse_args(["cluster", "photos", "--n-clusters", "3"]).n_clusters == 3


def test_python_m_skcce_help():
    out = subprocess.run(
        [sys.executable, "-m", "skcce", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in out.stdout and "cluster" in out.stdout


def test_help_says_cluster_takes_features_files_too(capsys):
    """``skcce --help`` describes ``cluster`` with both kinds of input (issue 27): a folder of
    images and a features file of each supported extension."""
    import contextlib

    with contextlib.suppress(SystemExit):
        main(["--help"])
    listing = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    line = listing[listing.index("cluster cluster") :].split(" reproduce ")[0]
    assert "folder of images" in line
    for extension in (".npy", ".npz", ".csv", ".parquet"):
        assert extension in line, (extension, line)


_COLD_START = """
import contextlib, io, sys
import skcce
print("import", "torch" in sys.modules)
from skcce.cli import main
for args in (["--help"], ["cluster", "--help"], ["demo", "--help"], ["reproduce", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(args)
print("help", "torch" in sys.modules)
skcce.CCEClustering  # the lazy public names still resolve (and bring torch)
print("attr", "torch" in sys.modules, sorted(set(skcce.__all__) - set(dir(skcce))))
"""


def test_import_and_help_do_not_import_torch():
    """Cold start (issue 14): ``import skcce`` and the CLI's --help parsing leave torch
    unimported; the public names load it on first access."""
    out = subprocess.run(
        [sys.executable, "-c", _COLD_START], capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:3] == ["import False", "help False", "attr True []"]


def test_demo_prints_comparison_table(monkeypatch, capsys):
    X, y = sklearn.datasets.load_digits(return_X_y=True)
    keep = np.isin(y, [0, 1, 2])
    monkeypatch.setattr(
        sklearn.datasets, "load_digits", lambda return_X_y=True: (X[keep][:300], y[keep][:300])
    )
    assert main(["demo", "--digits-only", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| CCEClustering |" in out and "| KMeans(n_init=10) |" in out
    row = next(line for line in out.splitlines() if line.startswith("| CCEClustering |"))
    accuracy = float(row.split("|")[2].split()[0])
    assert 0.0 <= accuracy <= 1.0
