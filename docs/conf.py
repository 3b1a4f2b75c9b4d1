"""Sphinx configuration of the skcce documentation (API reference, user guide, gallery).

Build: ``pip install -e ".[docs,vision]"`` then ``sphinx-build -W --keep-going -b html docs
docs/_build/html``. The gallery scripts in ``examples/`` are executed during the build; pass
``-D plot_gallery=0`` for a quick build without running them.
"""

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

# ----- HTML --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skcce {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_show_sourcelink = False
