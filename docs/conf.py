"""Sphinx configuration of the skcce documentation (API reference, user guide, gallery).

Build: ``pip install -e ".[docs,vision]"`` then ``sphinx-build -W --keep-going -b html docs
docs/_build/html``. The gallery scripts in ``examples/`` are executed during the build; pass
``-D plot_gallery=0`` for a quick build without running them.
"""

import importlib.util
import os
import sys
from pathlib import Path

import skcce

# Examples use one torch thread each (the build machine may have only two cores); the
# variables also reach libraries that read them at import time.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

project = "skcce"
author = "skcce developers"
copyright = "skcce developers"  # noqa: A001 - Sphinx's name for it
version = release = skcce.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# Build output and what sphinx-gallery writes beside its pages (notebooks, zips, code objects)
# are not documents; the gallery's own .rst pages are.
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
    "sg_execution_times.rst",
    # the gallery's timing table: a page that loads jQuery and DataTables from CDNs
    "auto_examples/sg_execution_times.rst",
    # (also applied to the static files) MathJax's latest.js, whose job is to fetch MathJax
    # from a CDN: never referenced, not shipped
    "mathjax/latest.js",
]

# ----- autodoc / autosummary / numpydoc ----------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # types are in the numpydoc "Parameters" sections
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True
nitpicky = False

# ----- MyST (the Markdown pages: user guide, benchmarks, reproduction, ...) ----------------
myst_enable_extensions = []
myst_heading_anchors = 3
# Markdown pages refer to code paths and to one another in plain text; a page may jump from
# # to ### on purpose. Neither should fail a -W build.
suppress_warnings = ["myst.header", "myst.xref_missing"]

# ----- sphinx-gallery ----------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py|/_",
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
}

# ----- Maths, offline (issue 27) ------------------------------------------------------------
# sphinx.ext.mathjax loads MathJax from a CDN by default: a site opened without network (the
# users of skcce often work on air-gapped GPU machines) would show raw TeX. The site serves
# its own copy instead: MathJax 3.2.2 as shipped by the sphinx-mathjax-offline package (in the
# docs extra). Only its files are used (copied to _static/mathjax/ as a static path), not its
# extension, so that the component is ours to choose: tex-svg.js, whose glyphs are inside the
# script (no web-font files to fetch, which a browser may refuse on a file:// page).
# docs/check_offline.py (run by .ci/run on the built site) fails on any remote script or
# stylesheet; tests/test_docs_offline.py checks these settings.
MATHJAX_PACKAGE = "sphinx-mathjax-offline"
MATHJAX_COMPONENT = "tex-svg.js"


def _mathjax_static_dir():
    """The folder that holds the packaged MathJax (as ``mathjax/``), or an error naming it."""
    spec = importlib.util.find_spec(MATHJAX_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(
            f"the docs render maths with a local MathJax from {MATHJAX_PACKAGE!r}: "
            'pip install -e ".[docs]"'
        )
    static = Path(spec.origin).parent / "static"
    if not (static / "mathjax" / MATHJAX_COMPONENT).is_file():
        raise RuntimeError(f"{MATHJAX_PACKAGE!r} has no mathjax/{MATHJAX_COMPONENT} in {static}")
    return static


mathjax_path = f"mathjax/{MATHJAX_COMPONENT}"  # relative: served from the site's _static/

# ----- HTML --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skcce {release}"
html_static_path = [str(_mathjax_static_dir())]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_show_sourcelink = False
