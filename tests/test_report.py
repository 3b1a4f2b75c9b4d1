"""Tests for skcce.cli._report: ``skcce cluster ... --report DIR`` (issue 15).

The image report is built once, by the command, for a small generated folder (three colours),
then checked as a file and in a real headless browser (Debian's ``chromium``; skipped with a
reason when it is not installed): every ``<img>`` resolves (``naturalWidth > 0``) and there is
one section per cluster. The screenshot is kept beside the report.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("timm")

from skcce.cli._report import summarize_clusters, write_features_report  # noqa: E402
from skcce.cli.cluster import cluster_main  # noqa: E402

K = 3
COLOURS = [(220, 40, 40), (40, 160, 60), (40, 80, 220)]
SIZES = [6, 4, 3]  # images per colour: clusters of different sizes


@pytest.fixture(scope="module")
def image_report(tmp_path_factory):
    """(report folder, image paths): the report of 13 generated images in 3 colours."""
    root = tmp_path_factory.mktemp("report")
    photos = root / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    paths = []
    for colour, (rgb, n) in enumerate(zip(COLOURS, SIZES, strict=True)):
        for i in range(n):
            pixels = np.clip(np.array(rgb) + rng.normal(0, 15, (24, 30, 3)), 0, 255)
            path = photos / f"c{colour}_{i}.png"
            Image.fromarray(pixels.astype(np.uint8)).save(path)
            paths.append(str(path))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        argv = [str(photos), "-k", str(K), "--model", "test_resnet", "--no-pretrained"]
        argv += ["--image-size", "32", "--device", "cpu", "--random-state", "0"]
        argv += ["--out", str(root / "labels.csv"), "--report", str(root / "out")]
        assert cluster_main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    return root / "out", paths


def test_summary_orders_by_size_and_splits_small_clusters():
    labels = [2, 2, 2, 0, 2, 0]
    conf = [0.9, 0.5, 0.7, 0.8, 0.6, 0.4]
    got = summarize_clusters(labels, conf, 4, n_show=3)
    assert [(s.cluster, s.size) for s in got] == [(2, 4), (0, 2), (1, 0), (3, 0)]
    assert got[0].most.tolist() == [0, 2] and got[0].least.tolist() == [4, 1]
    assert got[0].mean_confidence == pytest.approx(0.675)
    assert got[1].most.tolist() == [3] and got[1].least.tolist() == [5]
    assert np.isnan(got[2].mean_confidence)


def test_image_report_is_static_and_complete(image_report):
    out, paths = image_report
    page = (out / "index.html").read_text()
    sections = re.findall(r'<section class="cluster" id="cluster-(\d+)"', page)
    assert sorted(map(int, sections)) == list(range(K))
    sizes = [int(n) for n in re.findall(r"<h2>Cluster \d+: (\d+) member", page)]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == len(paths)
    assert "mean confidence" in page and "least confident" in page
    links = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert links and not [u for u in links if re.match(r"(https?:)?//", u)]  # nothing online
    assert "<script" not in page and "<link" not in page
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) == len(paths)  # small clusters: every image shown once
    for src in images:
        with Image.open(out / src) as thumb:
            assert max(thumb.size) <= 128


def test_features_report_has_figures(tmp_path):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(m, 0.2, (20, 5)) for m in (0, 3, 6)])
    labels = np.repeat([1, 0, 2], 20)
    index = write_features_report(
        tmp_path / "rep", X, labels, np.full(60, 0.9), K, ids=[f"r{i}" for i in range(60)]
    )
    page = open(index).read()
    assert page.count('<section class="cluster"') == K
    for name in ("map.png", "clusters.png"):
        with Image.open(tmp_path / "rep" / name) as figure:
            assert figure.format == "PNG" and figure.size[0] > 300
    # no thumbnails for features: no empty thumbs/ folder (issue 27)
    assert sorted(os.listdir(tmp_path / "rep")) == ["clusters.png", "index.html", "map.png"]


def test_features_report_names_rows_and_confidences_in_words(tmp_path):
    """An entry reads "row 257, confidence 0.982" (or "id r257 (row 257), ..."): a row index
    is never shown as a bare number beside a rank, as in "1. 257 (0.982)" (issue 27)."""
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    labels = np.zeros(300, dtype=int)
    conf = np.full(300, 0.5)
    conf[257], conf[3] = 0.982, 0.123  # the most and the least confident rows
    page = open(write_features_report(tmp_path / "plain", X, labels, conf, 1)).read()
    entries = re.findall(r"<li>(.*?)</li>", page)
    assert entries[0] == "row 257, confidence 0.982" and entries[-1] == "row 3, confidence 0.123"
    assert all(re.fullmatch(r"row \d+, confidence [01]\.\d{3}", e) for e in entries), entries
    assert "<ol" not in page  # no rank numbers beside the row numbers

    ids = [f"r{i}" for i in range(300)]
    page = open(write_features_report(tmp_path / "ids", X, labels, conf, 1, ids=ids)).read()
    entries = re.findall(r"<li>(.*?)</li>", page)
    assert entries[0] == "id r257 (row 257), confidence 0.982"
    assert entries[-1] == "id r3 (row 3), confidence 0.123"


def _four_images(folder):
    paths = [str(folder / f"{i}.png") for i in range(4)]
    for i, path in enumerate(paths):
        Image.new("RGB", (10, 10), COLOURS[i % 2]).save(path)
    return paths


def test_reports_show_warnings_in_a_box_under_the_title(tmp_path):
    from skcce.cli._report import write_image_report

    warned = ["1 of 2 clusters is empty after fit: Try a larger --lam (this fit: 100) <&>"]
    paths, labels, conf = _four_images(tmp_path), [0] * 4, [1] * 4
    pages = [write_image_report(tmp_path / "images", paths, labels, conf, 2, warnings=warned)]
    if importlib.util.find_spec("matplotlib") is not None:
        X = np.random.default_rng(0).normal(size=(4, 3))
        pages.append(write_features_report(tmp_path / "rows", X, labels, conf, 2, warnings=warned))
    for index in pages:
        page = open(index).read()
        box = page.index('<section class="warnings"')
        assert page.index("</h1>") < box < page.index("<p>") < page.index('<table class="summary"')
        assert "Try a larger --lam (this fit: 100) &lt;&amp;&gt;</li>" in page[box:]
    plain = open(write_image_report(tmp_path / "quiet", paths, labels, conf, 2)).read()
    assert 'class="warnings"' not in plain  # no box without warnings


def test_a_report_never_replaces_an_earlier_one_without_force(tmp_path):
    from skcce.cli._common import OutputExistsError
    from skcce.cli._report import existing_report_files, write_image_report

    paths = _four_images(tmp_path)
    report = tmp_path / "report"
    write_image_report(report, paths, [0, 0, 1, 1], [1] * 4, 2, title="first")
    before = {p: open(p, "rb").read() for p in existing_report_files(report)}
    assert len(before) == 1 + 4  # index.html and the thumbnails
    with pytest.raises(OutputExistsError, match="index.html' .and 4 other files"):
        write_image_report(report, paths, [1, 1, 0, 0], [1] * 4, 2, title="second")
    assert {p: open(p, "rb").read() for p in existing_report_files(report)} == before
    write_image_report(report, paths, [1, 1, 0, 0], [1] * 4, 2, title="second", force=True)
    assert "<title>second</title>" in (report / "index.html").read_text()


def test_image_report_still_writes_thumbnails_folder(image_report):
    out, paths = image_report
    assert len(os.listdir(out / "thumbs")) == len(paths)


def _chromium():
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


_CHECK = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var broken = images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var out = document.createElement("pre");
  out.id = "skcce-check";
  out.textContent = JSON.stringify({
    images: images.length,
    broken: broken.map(function (i) { return i.getAttribute("src"); }),
    sections: document.querySelectorAll("section.cluster").length
  });
  document.body.appendChild(out);
});
</script></body>"""


def _run_chromium(browser, profile, *args):
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    command += [f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt install chromium)")
def test_report_in_headless_chromium(image_report, tmp_path):
    out, paths = image_report
    browser = _chromium()
    # A copy of the page with a checking script, beside it so relative paths resolve.
    check = out / "check.html"
    check.write_text((out / "index.html").read_text().replace("</body>", _CHECK))
    try:
        done = _run_chromium(
            browser, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom",
            check.as_uri(),
        )  # fmt: skip
    finally:
        check.unlink()
    found = re.search(r'<pre id="skcce-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no check result from chromium: {done.stderr[-2000:]}"
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result == {"images": len(paths), "broken": [], "sections": K}

    shot = out.parent / "screenshot.png"
    _run_chromium(
        browser, tmp_path / "profile", "--hide-scrollbars", "--window-size=1100,1200",
        f"--screenshot={shot}", (out / "index.html").as_uri(),
    )  # fmt: skip
    with Image.open(shot) as screenshot:
        assert screenshot.size == (1100, 1200)
        colours = np.asarray(screenshot.convert("RGB"))[::4, ::4].reshape(-1, 3)
    for rgb in COLOURS:  # each colour's thumbnails were drawn
        assert (np.abs(colours.astype(int) - rgb).max(axis=1) < 60).sum() > 50, rgb
    if os.environ.get("SKCCE_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["SKCCE_KEEP_SCREENSHOT"])


def test_features_map_uses_umap_when_installed(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the report of a features file needs matplotlib")
    import types

    calls = []

    class FakeUMAP:  # stands in for umap-learn's estimator (not a dependency)
        def __init__(self, n_components, random_state):
            calls.append((n_components, random_state))

        def fit_transform(self, X):
            return np.asarray(X)[:, :2]

    monkeypatch.setitem(sys.modules, "umap", types.SimpleNamespace(UMAP=FakeUMAP))
    X = np.random.default_rng(0).normal(size=(40, 4))
    index = write_features_report(tmp_path / "rep", X, (X[:, 0] > 0).astype(int), np.ones(40), 2)
    assert calls == [(2, 0)] and "Map: UMAP" in open(index).read()
