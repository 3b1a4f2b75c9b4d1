"""``skcce cluster -k auto`` (issue 25): parsing ``-k auto`` and ``--n-clusters-range LOW HIGH``,
their errors, and the chosen K and its curve in the CSV run and the report.

The end-to-end runs cluster 150 rows of 3 well separated 10-D blobs over K = 2..4 (one torch
thread, tests/conftest.py; a few seconds each). Nothing is downloaded.
"""

import argparse
import csv
import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skcce.cli import build_parser
from skcce.cli._common import n_clusters_arg
from skcce.cli.cluster import cluster_main

FIT = ["--random-state", "0", "--device", "cpu"]
AUTO = ["-k", "auto", "--n-clusters-range", "2", "4", *FIT]


@pytest.fixture(scope="module")
def blobs_file(tmp_path_factory):
    """(path of a .npy of 150 rows in 3 well separated 10-D blobs, the true labels)."""
    X, y = make_blobs(n_samples=150, centers=3, n_features=10, cluster_std=1.0, random_state=0)
    path = tmp_path_factory.mktemp("auto") / "emb.npy"
    np.save(path, X.astype(np.float32))
    return path, y


def _usage_error(capsys, argv, *fragments):
    assert cluster_main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def _one_line_error(capsys, *fragments):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skcce cluster: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


# ----- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("auto", "auto"), ("AUTO", "auto"), ("7", 7)])
def test_n_clusters_arg(text, value):
    assert n_clusters_arg(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "foo", "2.5", ""])
def test_n_clusters_arg_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError, match="a positive integer or 'auto'"):
        n_clusters_arg(text)


def test_top_level_parser_takes_auto_and_a_range():
    parser = build_parser()
    args = parser.parse_args(["cluster", "emb.npy", "-k", "auto"])
    assert (args.n_clusters, args.n_clusters_range) == ("auto", None)
    args = parser.parse_args(["cluster", "emb.npy", "--n-clusters", "auto"])
    assert args.n_clusters == "auto"
    args = parser.parse_args(["cluster", "emb.npy", "-k", "auto", "--n-clusters-range", "1", "9"])
    assert args.n_clusters_range == (1, 9)
    assert parser.parse_args(["cluster", "emb.npy", "-k", "4"]).n_clusters == 4


@pytest.mark.parametrize(
    "argv, said",
    [
        (["emb.npy", "-k", "0"], "expected a positive integer or 'auto', got '0'"),
        (["emb.npy", "-k", "foo"], "expected a positive integer or 'auto', got 'foo'"),
        (["emb.npy", "-k", "auto", "--n-clusters-range", "5", "2"], "LOW (5) exceeds HIGH (2)"),
        (["emb.npy", "-k", "auto", "--n-clusters-range", "0", "4"], "got '0'"),
        (["emb.npy", "-k", "auto", "--n-clusters-range", "2", "x"], "got 'x'"),
        (["emb.npy", "-k", "auto", "--n-clusters-range", "3"], "expected 2 arguments"),
    ],
)
def test_bad_values_are_usage_errors(capsys, argv, said):
    _usage_error(capsys, argv, said)


def test_help_describes_auto_and_the_range(capsys):
    assert cluster_main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "'auto'" in out and "--n-clusters-range LOW HIGH" in out


def test_range_with_an_integer_k_is_refused(blobs_file, tmp_path, capsys):
    path, _ = blobs_file
    out = tmp_path / "l.csv"
    argv = [str(path), "-k", "3", "--n-clusters-range", "2", "4", *FIT, "--out", str(out)]
    assert cluster_main(argv) == 1
    _one_line_error(capsys, "--n-clusters-range applies to -k auto")
    assert not out.exists()


def test_range_above_the_rows_is_refused_before_fitting(tmp_path, capsys, monkeypatch):
    from skcce._clustering import CCEClustering

    def never(*args, **kwargs):
        raise AssertionError("fitted")

    monkeypatch.setattr(CCEClustering, "fit_predict", never)
    np.save(tmp_path / "emb.npy", np.eye(3, dtype=np.float32))
    argv = [str(tmp_path / "emb.npy"), "-k", "auto", "--n-clusters-range", "5", "9", *FIT]
    assert cluster_main([*argv, "--out", str(tmp_path / "l.csv")]) == 1
    _one_line_error(capsys, "--n-clusters-range 5 9", "more than the 3 rows")
    # the default range (2, 20) starts below the rows: checked, not refused
    argv = [str(tmp_path / "emb.npy"), "-k", "auto", *FIT, "--out", str(tmp_path / "l.csv")]
    with pytest.raises(AssertionError, match="fitted"):
        cluster_main(argv)


# ----- the run --------------------------------------------------------------------------------


def test_auto_run_writes_the_csv_and_says_the_chosen_k(blobs_file, tmp_path, capsys):
    path, y = blobs_file
    out = tmp_path / "labels.csv"
    assert cluster_main([str(path), *AUTO, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "-k auto chose K=3" in err and "K tried: 2..4" in err, err
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["index", "cluster", "confidence"] and len(rows) == 151
    labels = [int(r[1]) for r in rows[1:]]
    assert set(labels) == {0, 1, 2}
    assert adjusted_rand_score(y, labels) == 1.0


def test_auto_features_report_names_k_and_shows_the_curve(blobs_file, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    path, _ = blobs_file
    report = tmp_path / "report"
    argv = [str(path), *AUTO, "--out", str(tmp_path / "l.csv"), "--report", str(report)]
    assert cluster_main(argv) == 0
    capsys.readouterr()
    assert {p.name for p in report.iterdir()} == {
        "index.html",
        "map.png",
        "clusters.png",
        "n_clusters.png",
    }
    assert (report / "n_clusters.png").read_bytes().startswith(b"\x89PNG")
    page = (report / "index.html").read_text()
    assert "<title>skcce cluster " in page and "-k auto (chose K=3)</title>" in page
    assert "Number of clusters: K = 3, chosen from the data (-k auto)" in page
    assert '<img class="plot curve" src="n_clusters.png"' in page
    table = page[page.index('<table class="summary n-clusters">') :].split("</table>")[0]
    assert [int(k) for k in _cells(table, 0)] == [2, 3, 4]
    assert all(0.0 <= float(v) <= 1.0 for v in _cells(table, 1))
    assert '<tr class="chosen"><td>3</td>' in table
    assert page.count('<section class="cluster"') == 3


def test_integer_k_report_has_no_curve(blobs_file, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    path, _ = blobs_file
    report = tmp_path / "report"
    report.mkdir()
    (report / "n_clusters.png").write_bytes(b"from an earlier -k auto report")
    argv = [str(path), "-k", "3", *FIT, "-o", str(tmp_path / "l.csv"), "--report", str(report)]
    argv.append("--force")  # replaces the earlier report's curve
    assert cluster_main(argv) == 0
    assert "chose" not in capsys.readouterr().err
    assert not (report / "n_clusters.png").exists()
    page = (report / "index.html").read_text()
    assert "n-clusters" not in page and "-k 3</title>" in page


def _cells(table, column):
    rows = table.split("<tr")[2:]  # after the header row
    return [row.split("<td>")[1 + column].split("</td>")[0] for row in rows]


# ----- the report's section, without a fit ----------------------------------------------------


def test_image_report_without_matplotlib_keeps_the_table(tmp_path, monkeypatch):
    Image = pytest.importorskip("PIL.Image")
    from skcce.cli._report import write_image_report

    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import -> ImportError
    paths = []
    for i in range(4):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.new("RGB", (8, 8), "red").save(paths[-1])
    scores = {2: 0.91, 3: 0.4, 4: 0.3}
    index = write_image_report(
        tmp_path / "report", paths, [0, 0, 1, 1], [1, 1, 1, 1], 2, n_clusters_scores=scores,
        n_clusters_restarts={2: 10, 3: 10, 4: 4},
    )  # fmt: skip
    page = open(index).read()
    assert "K = 2, chosen from the data" in page and "pip install skcce[report]" in page
    assert '<tr class="chosen"><td>2</td><td>0.910</td>' in page
    # K = 4 kept the screening pass's criterion; K = 3 was fitted with every restart
    assert "<tr><td>4</td><td>0.300</td><td>screening only (4 restarts)</td></tr>" in page
    assert "<tr><td>3</td><td>0.400</td><td></td></tr>" in page
    assert not (tmp_path / "report" / "n_clusters.png").exists()


def test_report_when_k_1_is_chosen(tmp_path):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    from skcce.cli._report import write_features_report

    X = np.random.default_rng(0).uniform(size=(40, 3))
    index = write_features_report(
        tmp_path, X, np.zeros(40, int), np.ones(40), 1, n_clusters_scores={2: 0.1, 3: 0.05}
    )
    page = open(index).read()
    assert "K = 1, chosen from the data" in page
    assert "no K of the range had a criterion high enough" in page
    assert 'class="chosen"' not in page  # K = 1 is not fitted: no row of the table
    assert (tmp_path / "n_clusters.png").exists()
