"""Tests for skcce.cli._features_file and ``skcce cluster FILE`` on precomputed features (issue 15).

Small blobs (36 rows, 3 clusters) keep each fit to a few seconds; .csv/.parquet tests skip
when pandas/pyarrow (the optional ``tables`` extra) are not installed.
"""

import csv
import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skcce.cli._features_file import read_features
from skcce.cli.cluster import cluster_main

FIT = ["-k", "3", "--random-state", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=36, centers=3, n_features=6, cluster_std=0.3, random_state=0)
    return X.astype(np.float32), y


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _read_csv(path):
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def _one_line_error(capsys, *parts):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("skcce cluster: error: "), err
    for part in parts:
        assert part in err, err
    return err


def test_npy_is_memory_mapped_and_clustered(blobs, tmp_path, monkeypatch):
    X, y = blobs
    np.save(tmp_path / "emb.npy", X)
    features = read_features(tmp_path / "emb.npy")
    assert isinstance(features.X, np.memmap) and not features.X.flags.writeable
    assert np.array_equal(features.X, X) and features.ids is None

    from skcce._clustering import CCEClustering

    seen = []
    real = CCEClustering.fit_predict

    def spy(self, X, y=None, **kwargs):
        seen.append(type(X))
        return real(self, X, y, **kwargs)

    monkeypatch.setattr(CCEClustering, "fit_predict", spy)
    out = tmp_path / "labels.csv"
    argv = [str(tmp_path / "emb.npy"), *FIT, "--out", str(out)]
    report = tmp_path / "report"
    has_mpl = _has_matplotlib()
    assert cluster_main([*argv, "--report", str(report)] if has_mpl else argv) == 0
    assert seen == [np.memmap]  # never loaded whole by the command
    if has_mpl:  # the features report: 2-D map and bar charts (tests/test_report.py: details)
        # exactly these: no empty thumbs/ folder for a features file (issue 27)
        assert {p.name for p in report.iterdir()} == {"index.html", "map.png", "clusters.png"}
        assert (report / "index.html").read_text().count('<section class="cluster"') == 3
    header, rows = _read_csv(out)
    assert header == ["index", "cluster", "confidence"]
    assert [int(r[0]) for r in rows] == list(range(len(X)))
    labels = [int(r[1]) for r in rows]
    assert adjusted_rand_score(y, labels) == 1.0
    assert all(0 < float(r[2]) <= 1 for r in rows)


def test_npz_named_array_and_ids(blobs, tmp_path, capsys):
    X, y = blobs
    ids = np.array([f"img{i:03d}.jpg" for i in range(len(X))])
    np.savez(tmp_path / "two.npz", emb=X, name=ids)
    np.savez(tmp_path / "one.npz", X)
    assert read_features(tmp_path / "one.npz").X.shape == X.shape  # the only array

    assert cluster_main([str(tmp_path / "two.npz"), *FIT]) == 1
    _one_line_error(capsys, "holds 2 arrays", "'emb'", "'name'", "--array")
    assert cluster_main([str(tmp_path / "two.npz"), "--array", "nope", *FIT]) == 1
    _one_line_error(capsys, "no array 'nope' (--array)", "'emb', 'name'")

    out = tmp_path / "labels.csv"
    argv = [str(tmp_path / "two.npz"), "--array", "emb", "--id-column", "name", *FIT]
    assert cluster_main([*argv, "--out", str(out)]) == 0
    header, rows = _read_csv(out)
    assert header == ["name", "cluster", "confidence"]
    assert [r[0] for r in rows] == ids.tolist()
    assert adjusted_rand_score(y, [int(r[1]) for r in rows]) == 1.0
    # the ids array alone is not mistaken for a second features array
    assert read_features(tmp_path / "two.npz", id_column="name").X.shape == X.shape


def test_csv_with_an_id_column(blobs, tmp_path):
    pd = pytest.importorskip("pandas", reason="the tables extra (pandas) is not installed")
    X, y = blobs
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame.insert(0, "photo", [f"p{i}.jpg" for i in range(len(X))])
    frame.to_csv(tmp_path / "emb.csv", index=False)
    features = read_features(tmp_path / "emb.csv")  # the id column found by itself
    assert features.id_name == "photo" and np.allclose(features.X, X)
    assert features.row_ids()[:2].tolist() == ["p0.jpg", "p1.jpg"]
    frame.insert(1, "note", "x")
    frame.to_csv(tmp_path / "two.csv", index=False)
    with pytest.raises(ValueError, match="--id-column"):
        read_features(tmp_path / "two.csv")
    with pytest.raises(ValueError, match="no column 'nope'"):
        read_features(tmp_path / "emb.csv", id_column="nope")


def test_parquet_with_a_vector_column(blobs, tmp_path):
    pd = pytest.importorskip("pandas", reason="the tables extra (pandas) is not installed")
    pytest.importorskip("pyarrow", reason="the tables extra (pyarrow) is not installed")
    X, _ = blobs
    frame = pd.DataFrame({"id": np.arange(len(X)) + 100, "embedding": list(X)})
    frame.to_parquet(tmp_path / "emb.parquet")
    features = read_features(tmp_path / "emb.parquet", id_column="id")
    assert np.allclose(features.X, X) and features.row_ids()[0] == 100


def test_tables_without_pandas_name_the_extra(tmp_path, monkeypatch, capsys):
    (tmp_path / "emb.csv").write_text("a,b\n1,2\n3,4\n")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    assert cluster_main([str(tmp_path / "emb.csv"), "-k", "2"]) == 1
    _one_line_error(capsys, "needs pandas", "pip install skcce[tables]")


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("emb.txt", "1 2 3", "unsupported features file type '.txt'"),
        ("emb", "1 2 3", "unsupported features file type '(no extension)'"),
        ("cube.npy", np.zeros((4, 2, 2)), "must be a 2-D array"),
        ("text.npy", np.array([["a", "b"]]), "must be numbers"),
        ("empty.npy", np.zeros((0, 3)), "holds no features"),
    ],
)
def test_bad_features_files(tmp_path, capsys, name, content, match):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        np.save(path, content)
        path = path if name.endswith(".npy") else path.with_suffix(".npy")
    assert cluster_main([str(path), "-k", "2"]) == 1
    _one_line_error(capsys, match)


def test_more_clusters_than_rows_and_flags_for_folders(tmp_path, capsys):
    np.save(tmp_path / "emb.npy", np.ones((3, 2)))
    assert cluster_main([str(tmp_path / "emb.npy"), "-k", "5"]) == 1
    _one_line_error(capsys, "more than the 3 rows")
    assert cluster_main([str(tmp_path / "emb.npy"), "-k", "2", "--array", "x"]) == 1
    _one_line_error(capsys, "--array names an array of a .npz file")
    assert cluster_main([str(tmp_path), "-k", "2", "--id-column", "x"]) == 1
    _one_line_error(capsys, "apply to a features file, not a folder")
