"""The documentation renders maths offline (issue 27, item 5).

``docs/conf.py`` serves MathJax from the built site (a copy shipped by the
``sphinx-mathjax-offline`` package) instead of a CDN; ``docs/check_offline.py`` fails on any
remote script or stylesheet of a built site (.ci/run runs it on the full site, and renders a
few pages in headless Chromium with the network cut). Here, fast: the checker itself, the
settings of conf.py, and a one-page Sphinx build with those settings.
"""

import os
import runpy
import sys
from pathlib import Path
from unittest import mock

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
check = runpy.run_path(str(DOCS / "check_offline.py"))


def _site(root, pages, files=()):
    for name, text in {**pages, **dict(files)}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


_MATH = '<span class="math notranslate nohighlight">\\(x^2\\)</span>'
_LOCAL_MJ = '<script defer src="_static/mathjax/tex-svg.js?v=1"></script>'


def test_checker_passes_a_local_site_and_allows_links(tmp_path):
    page = (
        f"<html><head>{_LOCAL_MJ}<link rel='stylesheet' href='_static/a.css'>"
        "<link rel='next' href='https://example.org/next.html'></head><body>"
        f"<a href='https://arxiv.org/abs/1'>paper</a>{_MATH}<img src='data:image/png;base64,AA'>"
        "</body></html>"
    )
    site = _site(
        tmp_path,
        {"index.html": page},
        {"_static/mathjax/tex-svg.js": "", "_static/a.css": "a { background: url(b.png) }"},
    )
    assert check["check_site"](site) == []


@pytest.mark.parametrize(
    "head, body, what",
    [
        ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>',
         _MATH, "<script> https://cdn"),
        ('<link rel="stylesheet" href="//fonts.example.org/f.css">', "", "<link> //fonts"),
        ('<link rel="preload" as="font" href="http://x.org/f.woff2">', "", "<link> http://x"),
        ("", '<img src="https://x.org/a.png">', "<img> https://x.org"),
        ("<style>@import 'https://x.org/s.css';</style>", "", "<style> https://x.org"),
        ("", '<div style="background:url(http://x.org/i.png)"></div>', "style> http://x"),
        ("", _MATH, "loads no local MathJax"),
    ],
)  # fmt: skip
def test_checker_flags_remote_loads(tmp_path, head, body, what):
    site = _site(tmp_path, {"p/page.html": f"<html><head>{head}</head><body>{body}</body>"})
    problems = check["check_site"](site)
    assert len(problems) >= 1 and any(what in p for p in problems), problems


def test_checker_flags_remote_css_and_a_missing_mathjax_file(tmp_path):
    site = _site(
        tmp_path,
        {"index.html": f"<html><head>{_LOCAL_MJ}</head><body>{_MATH}</body></html>"},
        {"_static/s.css": "@font-face { src: url('https://x.org/f.woff2') }"},
    )
    problems = check["check_site"](site)
    assert any("_static/s.css: loads a remote resource" in p for p in problems), problems
    assert any("tex-svg.js?v=1 is not in the site" in p for p in problems), problems


def _conf():
    """docs/conf.py's settings (its environment and sys.path changes undone)."""
    pytest.importorskip("sphinx")
    path = list(sys.path)
    try:
        with mock.patch.dict(os.environ):
            return runpy.run_path(str(DOCS / "conf.py"))
    except RuntimeError as exc:  # the packaged MathJax is missing
        pytest.skip(f"docs extra not installed: {exc}")
    finally:
        sys.path[:] = path


def test_conf_serves_mathjax_from_the_site():
    conf = _conf()
    assert "sphinx.ext.mathjax" in conf["extensions"]
    assert not check["is_remote"](conf["mathjax_path"])
    served = [Path(d) / conf["mathjax_path"] for d in conf["html_static_path"]]
    assert any(p.is_file() and p.stat().st_size > 100_000 for p in served), served
    # the gallery's timing table loads jQuery and DataTables from CDNs: not built
    assert "auto_examples/sg_execution_times.rst" in conf["exclude_patterns"]


def test_one_page_build_loads_no_remote_resource(tmp_path):
    """A page with maths, built with conf.py's maths and static settings, loads its MathJax
    from the site; with Sphinx's default (a CDN) the same check fails."""
    conf = _conf()
    from sphinx.cmd.build import build_main

    src = tmp_path / "src"
    src.mkdir()
    (src / "index.rst").write_text("Title\n=====\n\nThe loss :math:`H_2(y, \\sigma)`.\n")
    settings = {k: conf[k] for k in ("mathjax_path", "html_static_path", "exclude_patterns")}
    (src / "conf.py").write_text(
        "extensions = ['sphinx.ext.mathjax']\n"
        + "".join(f"{k} = {v!r}\n" for k, v in settings.items())
    )
    assert build_main(["-q", "-b", "html", str(src), str(tmp_path / "out")]) == 0
    assert check["check_site"](tmp_path / "out") == []
    assert not (tmp_path / "out" / "_static" / "mathjax" / "latest.js").exists()  # a CDN loader

    (src / "conf.py").write_text("extensions = ['sphinx.ext.mathjax']\n")  # today's default
    assert build_main(["-q", "-b", "html", str(src), str(tmp_path / "cdn")]) == 0
    problems = check["check_site"](tmp_path / "cdn")
    assert any("<script> https://" in p for p in problems), problems
