"""Tests for ``skcce cluster`` (skcce.cli.cluster). No downloads: ``--no-pretrained``."""

import argparse
import csv
import importlib.util
import os

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("timm")

from skcce.cli.cluster import add_cluster_parser, cluster_main, find_images  # noqa: E402

FAST = ["--model", "test_resnet", "--no-pretrained", "--image-size", "32", "--device", "cpu"]


def _cce_clustering():
    try:
        from skcce._clustering import CCEClustering
    except ImportError:
        pytest.skip("skcce._clustering.CCEClustering is not available")
    return CCEClustering


@pytest.fixture
def photo_dir(tmp_path):
    """12 small PNG/JPEG images in nested folders, plus files that are not images."""
    root = tmp_path / "photos"
    rng = np.random.default_rng(0)
    names = [f"a/img{i}.png" for i in range(5)] + [f"b/c/img{i}.PNG" for i in range(4)]
    names += ["top0.jpg", "top1.jpeg", "top2.bmp"]
    for k, name in enumerate(names):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        colour = np.array([255, 0, 0]) if k % 2 else np.array([0, 0, 255])
        pixels = np.clip(colour + rng.normal(0, 20, size=(20, 24, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(path)
    (root / "notes.txt").write_text("not an image")
    (root / ".hidden.png").write_text("hidden junk, skipped")
    return root, sorted(str(root / n) for n in names)


def _cluster_options(n_clusters=2):
    return ["--n-clusters", str(n_clusters), "--random-state", "0", *FAST]


def _read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_find_images_recursive_sorted_and_filtered(photo_dir):
    root, expected = photo_dir
    found = find_images(root)
    assert sorted(found) == expected
    assert found == sorted(found, key=lambda p: os.path.relpath(p, root).split(os.sep))
    assert all(os.path.isfile(p) for p in found)


def test_cluster_folder_writes_csv(photo_dir, tmp_path, capsys):
    _cce_clustering()
    root, expected = photo_dir
    out = tmp_path / "labels.csv"
    assert cluster_main([str(root), *_cluster_options(), "--out", str(out)]) == 0
    rows = _read_csv(out)
    assert rows[0] == ["path", "cluster", "confidence"]
    body = rows[1:]
    assert sorted(r[0] for r in body) == expected
    assert {int(r[1]) for r in body} <= {0, 1}
    confidence = np.array([float(r[2]) for r in body])
    assert ((confidence >= 0.5 - 1e-6) & (confidence <= 1 + 1e-6)).all()  # max of 2 probs
    assert sorted(os.listdir(tmp_path)) == ["labels.csv", "photos"]  # no temporary file left
    assert "wrote 12 rows" in capsys.readouterr().err


def test_cluster_to_stdout(photo_dir, capsys):
    _cce_clustering()
    root, expected = photo_dir
    assert cluster_main([str(root), *_cluster_options(3), "--lam", "10", "--out", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "path,cluster,confidence"
    assert len(lines) == 1 + len(expected)


def test_add_cluster_parser_wires_the_handler(photo_dir, tmp_path):
    _cce_clustering()
    root, expected = photo_dir
    parser = argparse.ArgumentParser(prog="skcce")
    add_cluster_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "out.csv"
    args = parser.parse_args(["cluster", str(root), *_cluster_options(), "-o", str(out)])
    assert args.func(args) == 0
    assert len(_read_csv(out)) == 1 + len(expected)


def _assert_one_line_error(capsys, *fragments):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("skcce cluster: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_path(tmp_path, capsys):
    assert cluster_main([str(tmp_path / "nope"), *_cluster_options()]) == 1
    _assert_one_line_error(capsys, "path not found")


def test_path_is_a_file(photo_dir, capsys):
    root, expected = photo_dir
    assert cluster_main([expected[0], *_cluster_options()]) == 1
    _assert_one_line_error(capsys, "not a folder")


def test_no_images_found(tmp_path, capsys):
    (tmp_path / "readme.txt").write_text("nothing to see")
    out = tmp_path / "labels.csv"
    assert cluster_main([str(tmp_path), *_cluster_options(), "--out", str(out)]) == 1
    _assert_one_line_error(capsys, "no images found", ".png")
    assert not out.exists()


def test_too_many_clusters(photo_dir, tmp_path, capsys):
    root, _ = photo_dir
    assert cluster_main([str(root), *_cluster_options(50), "--out", str(tmp_path / "x.csv")]) == 1
    _assert_one_line_error(capsys, "more than the 12 images")


def test_unwritable_out(photo_dir, tmp_path, capsys):
    root, _ = photo_dir
    missing_folder = tmp_path / "no" / "such" / "labels.csv"
    assert cluster_main([str(root), *_cluster_options(), "--out", str(missing_folder)]) == 1
    _assert_one_line_error(capsys, "does not exist")
    assert cluster_main([str(root), *_cluster_options(), "--out", str(tmp_path)]) == 1
    _assert_one_line_error(capsys, "is a folder")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions"
)
def test_read_only_out_folder(photo_dir, tmp_path, capsys):
    root, _ = photo_dir
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert cluster_main([str(root), *_cluster_options(), "-o", str(locked / "l.csv")]) == 1
    finally:
        locked.chmod(0o700)
    _assert_one_line_error(capsys, "not writable")


def test_corrupt_image_leaves_previous_csv_untouched(photo_dir, tmp_path, capsys):
    _cce_clustering()
    root, _ = photo_dir
    (root / "a" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    out = tmp_path / "labels.csv"
    out.write_text("previous results\n")
    assert cluster_main([str(root), *_cluster_options(), "--out", str(out), "--force"]) == 1
    _assert_one_line_error(capsys, "broken.png")
    assert out.read_text() == "previous results\n"
    assert sorted(os.listdir(tmp_path)) == ["labels.csv", "photos"]


def test_unknown_model(photo_dir, tmp_path, capsys):
    _cce_clustering()
    root, _ = photo_dir
    argv = [str(root), "-k", "2", "--model", "resnet5O", "--no-pretrained"]
    assert cluster_main([*argv, "--out", str(tmp_path / "l.csv")]) == 1
    _assert_one_line_error(capsys, "Did you mean", "resnet50")


@pytest.mark.parametrize(
    "argv",
    [[], ["photos"], ["photos", "--n-clusters", "0"], ["photos", "-k", "2", "--batch-size", "x"]],
)
def test_usage_errors_return_2(argv, capsys):
    assert cluster_main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_returns_0(capsys):
    assert cluster_main(["--help"]) == 0
    assert "--n-clusters" in capsys.readouterr().out


def test_auto_on_a_folder_names_the_chosen_k(photo_dir, tmp_path, capsys):
    """``-k auto`` on images (issue 25): K chosen in the range, used for the CSV and the report
    (its title and the section of the curve)."""
    _cce_clustering()
    root, expected = photo_dir
    out, report = tmp_path / "labels.csv", tmp_path / "report"
    argv = [str(root), "-k", "auto", "--n-clusters-range", "2", "3", *_cluster_options()[2:]]
    assert cluster_main([*argv, "--out", str(out), "--report", str(report)]) == 0
    err = capsys.readouterr().err
    chosen = int(err.split("-k auto chose K=")[1].split(",")[0])
    assert chosen in (2, 3)
    rows = _read_csv(out)[1:]
    assert len(rows) == len(expected) and {int(r[1]) for r in rows} <= set(range(chosen))
    page = (report / "index.html").read_text()
    assert f"-k auto (chose K={chosen})</title>" in page
    assert f"K = {chosen}, chosen from the data (-k auto)" in page
    assert page.count('<section class="cluster"') == chosen
    if importlib.util.find_spec("matplotlib") is not None:  # the curve is drawn with it
        assert (report / "n_clusters.png").exists()


def test_auto_range_above_the_images(photo_dir, tmp_path, capsys):
    root, _ = photo_dir
    argv = [str(root), "-k", "auto", "--n-clusters-range", "13", "20", *_cluster_options()[2:]]
    assert cluster_main([*argv, "--out", str(tmp_path / "x.csv")]) == 1
    _assert_one_line_error(capsys, "--n-clusters-range 13 20", "more than the 12 images")
