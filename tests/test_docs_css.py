"""Wide tables scroll in the site: the stylesheet exists, says so, and the Sphinx configuration includes it."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_table_stylesheet_makes_wide_tables_scroll():
    css = (DOCS / "_static" / "tables.css").read_text()
    found = re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    rules = {selector.strip(): body for selector, body in found}
    assert "overflow-x: auto" in rules["article .table-wrapper"]  # the tables the theme wraps
    assert "overflow-x: auto" in rules["article table:not(.table-wrapper table)"]  # and those it does not
    assert "display: block" in rules["article table:not(.table-wrapper table)"]


def test_the_sphinx_configuration_includes_the_stylesheet():
    conf = runpy.run_path(str(DOCS / "conf.py"))
    assert "tables.css" in conf["html_css_files"]
    assert all((DOCS / folder / "tables.css").is_file() for folder in conf["html_static_path"])
