"""Check that a built HTML site loads nothing from the network (issue 27).

Usage::

    python docs/check_offline.py BUILD_DIR [--browser PAGE ...]

Fails (exit status 1, one line per problem) when a page of ``BUILD_DIR`` loads a remote
resource: a ``<script src>``, a ``<link href>`` other than a plain navigation link (stylesheets,
preloads, icons, ...), an image, frame, media source, embedded object or a CSS ``url()`` /
``@import`` whose address has a scheme or starts with ``//``. Links that a reader follows
(``<a href>``) are not loads and are allowed. A page that contains maths must load MathJax from
the site itself, and that file must exist.

``--browser PAGE`` (a path relative to ``BUILD_DIR``; repeatable) also opens the page in
headless Chromium with every network address made unreachable and checks that MathJax
rendered each formula of it (one ``<mjx-container>`` per ``math`` element).

.ci/run runs it on the site it builds; tests/test_docs_offline.py tests it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

#: ``<link rel=...>`` values that name a related page rather than load a resource.
NAVIGATION_RELS = frozenset(
    "alternate author bookmark canonical first help index last license next prev previous "
    "search start top up external nofollow noopener noreferrer".split()
)
_REMOTE = re.compile(r"^\s*([a-z][a-z0-9+.-]*:|//)", re.I)
_LOCAL_SCHEMES = ("data:", "blob:", "about:", "javascript:", "mailto:")
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)['"]""", re.I)
_MATHJAX = re.compile(r"(^|/)mathjax/[^/]*\.js$", re.I)


def is_remote(url: str) -> bool:
    """True for an address that a browser would fetch from the network."""
    url = url.strip()
    if url.lower().startswith(_LOCAL_SCHEMES) or url.lower().startswith("file:"):
        return False
    return bool(_REMOTE.match(url))


def css_remote_urls(text: str) -> list[str]:
    """The remote addresses of ``url(...)`` and ``@import`` in a style sheet or style text."""
    found = [a or b for a, b in _CSS_URL.findall(text)]
    return [url for url in found if is_remote(url)]


class _PageScan(HTMLParser):
    """Collects a page's remote loads, its script sources and whether it has maths."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.remote: list[str] = []
        self.scripts: list[str] = []
        self.math = 0
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if "math" in a.get("class", "").split():
            self.math += 1
        loads = []
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
            loads.append(a["src"])
        elif tag == "link" and a.get("href"):
            rels = set(a.get("rel", "").lower().split())
            if not rels or not rels <= NAVIGATION_RELS:
                loads.append(a["href"])
        elif tag in ("img", "iframe", "frame", "source", "video", "audio", "track", "embed"):
            loads += [a.get("src", ""), a.get("poster", "")]
            loads += [part.split()[0] for part in a.get("srcset", "").split(",") if part.split()]
        elif tag == "object":
            loads.append(a.get("data", ""))
        elif tag == "image":  # SVG
            loads += [a.get("href", ""), a.get("xlink:href", "")]
        self.remote += [f"<{tag}> {url}" for url in loads if url and is_remote(url)]
        self.remote += [f"<{tag} style> {u}" for u in css_remote_urls(a.get("style", ""))]
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.remote += [f"<style> {url}" for url in css_remote_urls(data)]


def check_page(path: Path, root: Path) -> list[str]:
    """Problems of one HTML page (an empty list when it loads nothing remote)."""
    scan = _PageScan()
    scan.feed(path.read_text(encoding="utf-8", errors="replace"))
    name = path.relative_to(root).as_posix()
    problems = [f"{name}: loads a remote resource: {what}" for what in scan.remote]
    if scan.math:
        local = [s for s in scan.scripts if _MATHJAX.search(s.split("?")[0]) and not is_remote(s)]
        if not local:
            problems.append(f"{name}: has {scan.math} formula(s) but loads no local MathJax")
        for src in local:
            if not (path.parent / src.split("?")[0]).is_file():
                problems.append(f"{name}: its MathJax script {src} is not in the site")
    return problems


def check_site(root) -> list[str]:
    """Problems of every ``*.html`` page and ``*.css`` file under ``root``."""
    root = Path(root)
    pages = sorted(root.rglob("*.html"))
    if not pages:
        return [f"{root}: no HTML page found"]
    problems = []
    for page in pages:
        problems += check_page(page, root)
    for sheet in sorted(root.rglob("*.css")):
        text = sheet.read_text(encoding="utf-8", errors="replace")
        name = sheet.relative_to(root).as_posix()
        problems += [f"{name}: loads a remote resource: {url}" for url in css_remote_urls(text)]
    return problems


def chromium():
    """The headless browser's executable, or None."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def check_rendered(page: Path, browser: str) -> list[str]:
    """Open ``page`` offline in headless Chromium; problems if a formula was not rendered."""
    scan = _PageScan()
    scan.feed(page.read_text(encoding="utf-8", errors="replace"))
    with tempfile.TemporaryDirectory() as profile:
        command = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}",
            # no network: every host unresolvable, every request through a closed port
            "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=20000", "--dump-dom", page.resolve().as_uri(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    rendered = done.stdout.count("<mjx-container")
    if not done.stdout.strip():
        return [f"{page}: chromium returned no page: {done.stderr[-500:]}"]
    if scan.math == 0:
        return [f"{page}: has no formula to check"]
    if rendered < scan.math:
        return [f"{page}: MathJax rendered {rendered} of its {scan.math} formula(s) offline"]
    return []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", help="the built HTML folder")
    parser.add_argument(
        "--browser", action="append", default=[], metavar="PAGE",
        help="also render PAGE (relative to the site) offline in headless Chromium",
    )  # fmt: skip
    args = parser.parse_args(argv)
    problems = check_site(args.site)
    if args.browser:
        browser = chromium()
        if browser is None:
            print("check_offline: note: chromium is not installed; pages not rendered")
        else:
            for page in args.browser:
                problems += check_rendered(Path(args.site) / page, browser)
    for problem in problems:
        print(f"check_offline: {problem}", file=sys.stderr)
    n_pages = len(list(Path(args.site).rglob("*.html")))
    print(f"check_offline: {n_pages} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
