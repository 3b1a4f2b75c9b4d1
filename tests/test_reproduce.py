"""Tests of ``skcce reproduce`` (skcce/_reproduce.py). Nothing here downloads anything."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

import skcce.cli.reproduce as reproduce
import skcce.datasets
from skcce._feature_extraction import WeightsUnavailableError
from skcce.cli import main

ALL_METHODS = ["cce-a", "cce-b", "kmeans", "shannon-a", "shannon-b", "reverse-a", "reverse-b"]
ALL_METHODS.append("sela")


def write_idx(path, array):
    """An uncompressed IDX file (the MNIST format) holding a uint8 array."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.tobytes())


def tiny_mnist_folder(folder, n_train=40, n_test=20, seed=0):
    """MNIST-layout IDX files with 10 classes of noisy blobs (not real digits)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        y = np.arange(n) % 10
        X = rng.integers(0, 60, size=(n, 28, 28))
        for i, c in enumerate(y):
            X[i, 2 * c : 2 * c + 8, 4:24] += 180
        write_idx(folder / f"{prefix}-images-idx3-ubyte", X)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", y)


def run(capsys, argv):
    """Run ``skcce`` in-process; return (status, stdout, stderr) whether it exits or returns."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(status, out, err):
    assert status not in (0, None)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("skcce reproduce: error: ")
    assert "Traceback" not in err
    assert "|" not in out  # stopped before printing any result table


# ----- help ----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["reproduce", "--help"], ["reproduce", "table1", "--help"]])
def test_help(capsys, argv):
    status, out, _ = run(capsys, argv)
    assert status == 0
    for word in ("table1", "table2", "--dataset", "--baselines", "--weights", "--out", "--runs"):
        assert word in out


def test_python_m_skcce_reproduce_bad_input_is_one_line():
    # a real process: exit status and stderr as a user sees them
    proc = subprocess.run(
        [sys.executable, "-m", "skcce", "reproduce", "table2", "--dataset", "digits"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "skcce reproduce: error: table2 does not run on 'digits' (8x8 digits are too small for "
        "VGG-4); choose from stl10, cifar10, cifar100-20, mnist, fashion-mnist"
    ]


# ----- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "status", "needle"),
    [
        (["table3", "--dataset", "mnist"], 2, "invalid choice: 'table3'"),
        (["table1", "--dataset", "imagenet"], 2, "invalid choice: 'imagenet'"),
        (["table1"], 2, "--dataset"),
        (["table1", "--dataset", "digits", "--runs", "0"], 2, "positive integer"),
        (["table2", "--dataset", "digits"], 1, "does not run on 'digits'"),
        (["table1", "--dataset", "digits", "--out", "/no/such/folder/r.json"], 1, "does not exist"),
        (["table1", "--dataset", "digits", "--weights", "w.pth"], 1, "only used by table1"),
    ],
)
def test_bad_arguments_one_line(capsys, argv, status, needle):
    got, out, err = run(capsys, ["reproduce", *argv])
    assert_one_line_error(got, out, err)
    assert got == status
    assert needle in err


def test_out_is_a_folder(capsys, tmp_path):
    got, out, err = run(
        capsys, ["reproduce", "table1", "--dataset", "digits", "--out", str(tmp_path)]
    )
    assert_one_line_error(got, out, err)
    assert "is a folder" in err


def test_out_folder_not_writable(capsys, tmp_path, monkeypatch):
    # os.access is what the check asks (as root a chmod would not make a folder read-only)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(locked) else real_access(p, mode)
    )
    argv = ["reproduce", "table1", "--dataset", "digits", "--out", str(locked / "r.json")]
    got, out, err = run(capsys, argv)
    assert_one_line_error(got, out, err)
    assert "not writable" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_without_cuda(capsys):
    got, out, err = run(capsys, ["reproduce", "table1", "--dataset", "digits", "--device", "cuda"])
    assert_one_line_error(got, out, err)
    assert "CUDA is not available" in err


@pytest.mark.parametrize("table", ["table1", "table2"])
def test_missing_paper_dataset_says_how_to_download(capsys, tmp_path, table):
    got, out, err = run(
        capsys, ["reproduce", table, "--dataset", "cifar10", "--root", str(tmp_path)]
    )
    assert_one_line_error(got, out, err)
    assert f"skcce reproduce {table} --dataset cifar10 --download" in err


def test_missing_fashion_mnist_names_the_debian_package(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(skcce.datasets, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "debian")
    argv = ["reproduce", "table2", "--dataset", "fashion-mnist", "--root", str(tmp_path)]
    got, out, err = run(capsys, argv)
    assert_one_line_error(got, out, err)
    assert "dataset-fashion-mnist" in err


def test_missing_weights_file(capsys, tmp_path):
    tiny_mnist_folder(tmp_path / "MNIST" / "raw")
    argv = ["reproduce", "table1", "--dataset", "mnist", "--root", str(tmp_path)]
    got, out, err = run(capsys, [*argv, "--weights", str(tmp_path / "none.safetensors")])
    assert_one_line_error(got, out, err)
    assert "weights file not found" in err


def test_offline_without_weights_stops_at_once(capsys, tmp_path, monkeypatch):
    tiny_mnist_folder(tmp_path / "MNIST" / "raw")
    monkeypatch.setattr(reproduce, "_hub_has_weights", lambda name: False)

    def must_not_load(*args, **kwargs):
        raise AssertionError("the backbone must not be loaded when the Hub is unreachable")

    monkeypatch.setattr("skcce._feature_extraction.FeatureExtractor.fit", must_not_load)
    got, out, err = run(
        capsys, ["reproduce", "table1", "--dataset", "mnist", "--root", str(tmp_path)]
    )
    assert_one_line_error(got, out, err)
    assert "--weights FILE" in err and "HF_HUB_OFFLINE=1" in err


def test_weights_download_failure_is_one_line(capsys, tmp_path, monkeypatch):
    tiny_mnist_folder(tmp_path / "MNIST" / "raw")
    monkeypatch.setattr(reproduce, "_hub_has_weights", lambda name: True)

    def fail(self, X, y=None):
        raise WeightsUnavailableError("could not get pretrained weights\nsecond line")

    monkeypatch.setattr("skcce._feature_extraction.FeatureExtractor.fit", fail)
    got, out, err = run(
        capsys, ["reproduce", "table1", "--dataset", "mnist", "--root", str(tmp_path)]
    )
    assert_one_line_error(got, out, err)
    assert "--weights FILE" in err


def test_stratified_subset_keeps_class_proportions():
    y = np.repeat(np.arange(4), [40, 20, 20, 20])
    idx = reproduce._stratified_subset(y, 50)
    assert len(idx) == 50 and np.all(np.diff(idx) > 0)
    assert np.bincount(y[idx]).tolist() == [20, 10, 10, 10]
    assert np.array_equal(reproduce._stratified_subset(y, 500), np.arange(100))


# ----- end to end ----------------------------------------------------------------------------
def test_digits_end_to_end_writes_json_with_all_methods(capsys, tmp_path):
    out_file = tmp_path / "results.json"
    argv = ["reproduce", "table1", "--dataset", "digits", "--subset", "300", "--epochs", "1"]
    argv += ["--runs", "1", "--baselines", "--out", str(out_file)]
    status, out, err = run(capsys, argv)
    assert status == 0, err
    assert sorted(os.listdir(tmp_path)) == ["results.json"]  # no temporary file left behind
    doc = json.loads(out_file.read_text())
    assert doc["complete"] is True
    assert doc["table"] == "table1" and doc["dataset"] == "digits" and doc["n_samples"] == 300
    assert doc["seeds"] == [0] and doc["settings"]["max_epochs"] == 1
    assert "raw 64-d pixels" in doc["inputs"]
    assert [m["key"] for m in doc["methods"]] == ALL_METHODS
    for m in doc["methods"]:
        assert len(m["accuracy"]) == 1 and m["errors"] == []
        assert 10.0 <= m["accuracy"][0] <= 100.0  # at least chance level on 10 balanced classes
        assert m["mean"] == m["accuracy"][0] and m["std"] == 0.0
        assert "paper_mean" not in m  # digits is not in the paper
    sela = doc["methods"][-1]["params"]
    assert sela["solver_options"]["method"] == "sinkhorn" and sela["lam"] == reproduce.SELA_LAMBDA
    assert "| KMeans(n_init=10) |" in out and "paper: accuracy %" in out


def test_table1_paper_dataset_with_stand_in_features(capsys, tmp_path, monkeypatch):
    # the ResNet-50 is replaced by a fixed random projection: no weights, no download
    tiny_mnist_folder(tmp_path / "MNIST" / "raw", n_train=60, n_test=40)

    class Projection:
        def transform(self, X):
            W = np.random.default_rng(0).standard_normal((28 * 28, 16)).astype(np.float32)
            return X.reshape(len(X), -1).astype(np.float32) @ W / 255.0

    monkeypatch.setattr(reproduce, "_load_backbone", lambda args: Projection())
    argv = ["reproduce", "table1", "--dataset", "mnist", "--root", str(tmp_path)]
    status, out, err = run(capsys, [*argv, "--runs", "2", "--epochs", "1", "--out", "-"])
    assert status == 0, err
    doc = json.loads(out[out.index("{") :])
    a, b = doc["methods"]
    assert (a["paper_mean"], a["paper_std"]) == (58.4, 3.2)  # supplement Table 1, MNIST (a)
    assert (b["paper_mean"], b["paper_std"]) == (58.4, 3.2)
    assert doc["settings"]["weight_decay"] == 0.001 and doc["settings"]["learning_rate"] == 0.1
    assert len(a["accuracy"]) == 2 and doc["n_samples"] == 100
    assert "| 58.40 (3.20) |" in out


def test_table2_fashion_mnist_vgg4_tiny(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(skcce.datasets, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "debian")
    tiny_mnist_folder(tmp_path / "FashionMNIST" / "raw", n_train=30, n_test=10)
    argv = ["reproduce", "table2", "--dataset", "fashion-mnist", "--root", str(tmp_path)]
    argv += ["--subset", "20", "--epochs", "1", "--runs", "1", "--out", str(tmp_path / "r.json")]
    status, out, err = run(capsys, argv)
    assert status == 0, err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["settings"]["model"] == "vgg4" and doc["settings"]["optimizer"] == "adam"
    assert doc["n_samples"] == 20 and doc["subset"] == 20
    assert [m["key"] for m in doc["methods"]] == ["cce-a", "cce-b"]
    assert all(m["accuracy"][0] >= 10.0 for m in doc["methods"])
