"""``skcce cluster`` and what it leaves behind (issue 46, item 6): no existing file replaced
without ``--force`` (refused before any work, and again at the moment of writing), the fit's
warnings in the command's own words (only flags it has), printed before the "wrote ..." lines
and shown in the report, and the same K and labels as the Python estimator for the same seed.

Every fit here is small (at most 300 rows, one torch thread: tests/conftest.py).
"""

import csv
import os
import re

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs

from skcce._advice import collapse_message, reword
from skcce.cli._common import OutputExistsError, write_file
from skcce.cli.cluster import ADVICE_FLAGS, _build_parser, cluster_main

FIT = ["--random-state", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def blobs_file(tmp_path_factory):
    """A .npy of 36 rows in 3 tight blobs: ``-k 3`` fits in a fraction of a second."""
    X, _ = make_blobs(n_samples=36, centers=3, n_features=6, cluster_std=0.3, random_state=0)
    path = tmp_path_factory.mktemp("blobs") / "emb.npy"
    np.save(path, X.astype(np.float32))
    return path


@pytest.fixture(scope="module")
def collapsing_file(tmp_path_factory):
    """A .npy of 20 rows that are two distinct points: ``-k 3`` must leave a cluster empty."""
    X = np.repeat([[0.0, 0.0, 0.0], [5.0, 5.0, 5.0]], 10, axis=0)
    path = tmp_path_factory.mktemp("collapse") / "two_points.npy"
    np.save(path, X)
    return path


def _one_line_error(capsys, *fragments):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skcce cluster: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], err
    return lines[0]


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if the command starts fitting."""
    from skcce._clustering import CCEClustering

    def refuse(self, *args, **kwargs):
        raise AssertionError("the command fitted although it had to stop first")

    monkeypatch.setattr(CCEClustering, "fit", refuse)
    monkeypatch.setattr(CCEClustering, "fit_predict", refuse)


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


# ----- never overwrite without --force ----------------------------------------------------------


def test_default_out_that_exists_is_refused_before_any_work(
    blobs_file, tmp_path, monkeypatch, capsys, no_fit
):
    """Without --out the CSV is ./labels.csv: an earlier one is kept, and nothing is fitted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "labels.csv").write_text("earlier results\n")
    assert cluster_main([str(blobs_file), "-k", "3", *FIT]) == 1
    line = _one_line_error(capsys, "'labels.csv' already exists", "--force", "--out")
    assert "(and" not in line
    assert (tmp_path / "labels.csv").read_text() == "earlier results\n"
    assert sorted(os.listdir(tmp_path)) == ["labels.csv"]  # no temporary file either


def test_existing_report_file_is_refused_and_nothing_is_written(
    blobs_file, tmp_path, capsys, no_fit
):
    out, report = tmp_path / "new.csv", tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text("an earlier report")
    (report / "map.png").write_bytes(b"an earlier map")
    argv = [str(blobs_file), "-k", "3", *FIT, "--out", str(out), "--report", str(report)]
    assert cluster_main(argv) == 1
    _one_line_error(capsys, "index.html' (and 1 other file it", "--force", "another --report")
    assert not out.exists()  # the CSV was free, but the command stopped before writing it
    assert (report / "index.html").read_text() == "an earlier report"
    assert sorted(os.listdir(report)) == ["index.html", "map.png"]


def test_an_empty_report_folder_is_not_a_conflict(blobs_file, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    report = tmp_path / "report"
    report.mkdir()
    (report / "notes.txt").write_text("the user's own file")  # not one the report writes
    argv = [str(blobs_file), "-k", "3", *FIT, "-o", str(tmp_path / "l.csv"), "--report"]
    assert cluster_main([*argv, str(report)]) == 0
    assert (report / "index.html").exists() and (report / "notes.txt").exists()


def test_force_overwrites_the_csv_and_the_report(blobs_file, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    out, report = tmp_path / "labels.csv", tmp_path / "report"
    argv = [str(blobs_file), "-k", "3", *FIT, "--out", str(out), "--report", str(report)]
    assert cluster_main(argv) == 0
    first = (report / "index.html").read_text()
    capsys.readouterr()
    out.write_text("stale\n")
    (report / "index.html").write_text("stale")
    assert cluster_main(argv) == 1  # a second run stops...
    _one_line_error(capsys, "labels.csv' (and 3 other files", "already exist", "--force",
                    "--out or --report")  # fmt: skip
    assert out.read_text() == "stale\n"
    assert cluster_main([*argv, "--force"]) == 0  # ...unless told to replace the files
    assert _rows(out)[0] == ["index", "cluster", "confidence"] and len(_rows(out)) == 37
    assert (report / "index.html").read_text() == first
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".skcce-")]


def test_a_file_that_appears_during_the_fit_is_not_overwritten(
    blobs_file, tmp_path, monkeypatch, capsys
):
    """The check at the start is repeated when the CSV is written, in one step with its
    creation: another program's file written meanwhile is kept."""
    from skcce._clustering import CCEClustering

    out = tmp_path / "labels.csv"
    real = CCEClustering.fit_predict

    def fit_predict_then_someone_writes(self, X, y=None, **kwargs):
        labels = real(self, X, y, **kwargs)
        out.write_text("written by someone else during the fit\n")
        return labels

    monkeypatch.setattr(CCEClustering, "fit_predict", fit_predict_then_someone_writes)
    assert cluster_main([str(blobs_file), "-k", "3", *FIT, "--out", str(out)]) == 1
    _one_line_error(capsys, "labels.csv' already exists", "--force")
    assert out.read_text() == "written by someone else during the fit\n"
    assert sorted(os.listdir(tmp_path)) == ["labels.csv"]


@pytest.mark.parametrize("hard_links", [True, False])
def test_write_file_never_replaces_without_force(tmp_path, monkeypatch, hard_links):
    if not hard_links:  # a file system without them (the exclusive-create path)

        def no_link(source, target):
            raise PermissionError("hard links are not supported here")

        monkeypatch.setattr(os, "link", no_link)
    path = tmp_path / "out.txt"
    write_file(path, lambda handle: handle.write("first"))
    with pytest.raises(OutputExistsError, match="out.txt' already exists; pass --force"):
        write_file(path, lambda handle: handle.write("second"))

    def racing(handle):  # another program creates the file while this one writes
        path.with_name("racing.txt").write_text("theirs")
        handle.write("ours")

    with pytest.raises(OutputExistsError):
        write_file(path.with_name("racing.txt"), racing)
    assert path.with_name("racing.txt").read_text() == "theirs"
    write_file(path, lambda handle: handle.write("second"), force=True)
    assert path.read_text() == "second"
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "racing.txt"]


# ----- the advice speaks of the command's flags -------------------------------------------------

_USED = [
    dict(init="mixed", prior="auto", optimizer="sgd", augment=None),
    dict(init="random", prior="estimate", optimizer="adam", augment="default"),
    dict(init="kmeans", prior="uniform", optimizer="sgd", augment=None),
]


def _flags_in(text):
    return set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", text))


@pytest.mark.parametrize("linear", [True, False])
@pytest.mark.parametrize("settings", _USED)
def test_advice_names_only_flags_the_command_has(linear, settings):
    used = dict(fairness_weight=1.3, lam=100.0, learning_rate=0.5, n_init=10, batch_size=250,
                n_clusters=4, **settings)  # fmt: skip
    python = collapse_message([1], [3], ([1, 2], 10), linear, used)
    command = reword(python, ADVICE_FLAGS)
    assert command == collapse_message([1], [3], ([1, 2], 10), linear, used, ADVICE_FLAGS)
    options = set(_build_parser()._option_string_actions)
    tips = command[command.index("Try ") :]
    named = _flags_in(tips)
    assert named and named <= options, named - options
    assert "=" not in tips  # no Python setting left
    for name in ("fairness_weight", "learning_rate", "batch_size", "optimizer", "augment"):
        assert name not in tips
    assert "--lam (this fit: 100)" in tips and "--n-clusters 4" in tips
    # the Python message is unchanged: the parameters, as a Python user sets them
    assert str(python) == collapse_message([1], [3], ([1, 2], 10), linear, used, None)
    assert "fairness_weight (this fit: 1.3)" in python and "n_clusters=4" in python


def test_every_advice_flag_is_an_option_and_a_parameter():
    from skcce._clustering import CCEClustering

    options = set(_build_parser()._option_string_actions)
    params = CCEClustering().get_params()
    for parameter, entry in ADVICE_FLAGS.items():
        flag = entry if isinstance(entry, str) else entry[0]
        assert flag in options and parameter in params, (parameter, flag)


def test_new_flags_reach_the_estimator():
    from skcce.cli.cluster import _clustering

    parser = _build_parser()
    args = parser.parse_args(["x.npy", "-k", "3", "--prior", "uniform", "--init", "kmeans"])
    params = _clustering(args).get_params()
    assert params["prior"] is None and params["init"] == "kmeans"
    args = parser.parse_args(["x.npy", "-k", "3", "--prior", "estimate", "--n-init", "4"])
    params = _clustering(args).get_params()
    assert params["prior"] == "estimate" and params["n_init"] == 4
    assert params["init"] == type(_clustering(args))().get_params()["init"]  # not given: default


def test_lam_help_says_what_lam_weighs(capsys):
    assert cluster_main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    lam = out[out.index("--lam LAMBDA") :].split(" --prior")[0]
    assert "pseudo-label step" in lam and "fairness term" in lam
    for flag in ("--force", "--prior {uniform,estimate}", "--init {random,kmeans}", "--n-init N"):
        assert flag in out


# ----- the fit's warnings: before "wrote ...", and in the report --------------------------------


def test_warning_in_the_command_words_before_wrote_and_in_the_report(
    collapsing_file, tmp_path, capsys
):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    import html

    out, report = tmp_path / "labels.csv", tmp_path / "report"
    argv = [str(collapsing_file), "-k", "3", *FIT, "--n-init", "2", "--out", str(out)]
    assert cluster_main([*argv, "--report", str(report)]) == 0
    lines = capsys.readouterr().err.splitlines()
    warned = [i for i, line in enumerate(lines) if line.startswith("skcce cluster: warning: ")]
    wrote = [i for i, line in enumerate(lines) if "wrote" in line]
    assert warned and len(wrote) == 2 and max(warned) < min(wrote), lines
    message = lines[warned[0]].removeprefix("skcce cluster: warning: ")
    assert "is empty after fit" in message and "(this fit: --n-init 2)" in message
    assert "n_init=" not in message and "fairness_weight" not in message
    page = (report / "index.html").read_text()
    box = page[page.index('<section class="warnings"') :].split("</section>")[0]
    assert html.escape(message) in box
    assert page.index('<section class="warnings"') < page.index('<section class="cluster"')


# ----- the same K and labels as the Python estimator --------------------------------------------


def test_auto_k_and_labels_match_the_python_estimator(tmp_path, capsys):
    """The command passes no setting of its own: with the same seed, ``-k auto`` on a features
    file gives the K and labels of ``CCEClustering(n_clusters="auto")`` on the array."""
    from skcce._clustering import CCEClustering

    X = load_digits().data[:300]
    np.save(tmp_path / "digits.npy", X)
    out = tmp_path / "labels.csv"
    argv = [str(tmp_path / "digits.npy"), "-k", "auto", "--n-clusters-range", "2", "6"]
    assert cluster_main([*argv, "--random-state", "3", "--out", str(out)]) == 0
    chosen = int(capsys.readouterr().err.split("-k auto chose K=")[1].split(",")[0])
    python = CCEClustering(n_clusters="auto", n_clusters_range=(2, 6), random_state=3).fit(X)
    assert chosen == python.n_clusters_
    labels = np.array([int(row[1]) for row in _rows(out)[1:]])
    np.testing.assert_array_equal(labels, python.labels_)
