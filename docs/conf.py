"""Sphinx configuration of the sfenv documentation (furo theme, MyST Markdown pages, autodoc).

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (the ``docs`` extra).
Tables that live in code (the registered ids, the scenario fields, the env's docstring, the
training configs) are put into the pages at build time by ``_ext/sfenv_docgen.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import sfenv  # noqa: E402

project = "sfenv"
author = "sfenv developers"
copyright = "sfenv developers"
release = version = sfenv.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sfenv_docgen",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "results", "notes-*.md", "README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

html_theme = "furo"
html_title = f"sfenv {release}"
html_static_path = ["_static"]
#: wide Markdown tables scroll sideways in the page column (tests/test_docs_css.py)
html_css_files = ["tables.css"]

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports = ["ray"]
napoleon_google_docstring = False
napoleon_numpy_docstring = False
nitpicky = False
