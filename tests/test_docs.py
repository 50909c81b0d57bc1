"""The documentation: the site builds with warnings as errors, its result tables come from the result
files, and the release files agree with pyproject.toml."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PYPROJECT_TEXT = (ROOT / "pyproject.toml").read_text()  # read with regexes: tomllib is Python >= 3.11 only
VERSION = re.search(r'^version = "([^"]+)"', PYPROJECT_TEXT, re.M).group(1)
LICENSE_ID = re.search(r'^license = \{ text = "([^"]+)" \}', PYPROJECT_TEXT, re.M).group(1)


def _make_results():
    sys.path.insert(0, str(DOCS))
    try:
        import make_results
    finally:
        sys.path.remove(str(DOCS))
    return make_results


def test_docs_build_with_warnings_as_errors(tmp_path: Path):
    for module in ("sphinx", "furo", "myst_parser"):
        pytest.importorskip(module, reason=f"{module} is not installed (the docs extra: pip install -e '.[docs]')")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, f"sphinx-build -W failed:\n{proc.stderr[-5000:]}"
    assert not proc.stderr.strip(), proc.stderr[-5000:]
    html = tmp_path / "html"
    for page in ("index", "getting-started", "env", "scenarios", "agents", "training", "evaluation", "scaling",
                 "model", "claims", "benchmarks", "history", "api", "architecture", "changelog"):
        assert (html / f"{page}.html").exists(), page
    env_page = (html / "env.html").read_text()
    assert "sfenv/Geo8ContendedCost-v6" in env_page and "Version History" in env_page
    api = (html / "api.html").read_text()
    for obj in ("sfenv.env.geosched.GeoSchedEnv", "sfenv.sim.engine.Simulator", "sfenv.agents.base.SchedulerAgent"):
        assert f'id="{obj}"' in api, obj
    assert "Validation against measured runs" in (html / "model.html").read_text()
    assert list((html / "_images").glob("*.png")), "the benchmark figures are in the site"
    assert (html / "_static" / "tables.css").is_file()  # wide tables scroll (tests/test_docs_css.py)
    assert '_static/tables.css' in (html / "claims.html").read_text()


def test_result_tables_are_up_to_date_with_their_files():
    mr = _make_results()
    assert mr.build(figures=False, check=True) == [], "run: python docs/make_results.py"


def test_a_result_table_cell_is_the_mean_of_its_file():
    # recomputed here without the evaluator's summarise: mean JCT of fifo over the file's episodes
    mr = _make_results()
    data = json.loads((mr.DATA / "benchmark-spider-8.json").read_text())
    jcts = [r["mean_jct_s"] / 3600 for r in data["episodes"] if r["agent"] == "fifo"]
    table = (mr.RESULTS / "benchmark-spider-8.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| `fifo`"))
    assert row.split("|")[3].strip().startswith(f"{sum(jcts) / len(jcts):.2f} ± ")
    assert row.split("|")[2].strip() == str(len(jcts))


def _table_cells(table: str, agent: str) -> list[str]:
    """The cells of ``agent``'s row of a rendered Markdown table (first column: the agent)."""
    row = next(line for line in table.splitlines() if line.startswith(f"| `{agent}`"))
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _table_headings(table: str) -> list[str]:
    row = next(line for line in table.splitlines() if line.startswith("| agent"))
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_egress_and_total_cost_columns_show_only_for_rows_that_carry_them():
    mr = _make_results()
    rows, meta = mr.load_rows(mr.DATA / "evaluate-bace-6.json")
    assert all("egress_usd" in r and "total_cost_usd" in r for r in rows), "the file was written with egress billed"
    source = {"command": "sfenv evaluate", "date": "2026-11-26", "machine": "test"}
    table = mr.render_table("t", rows, meta, source)
    headings = _table_headings(table)
    at = headings.index("electricity, USD")
    assert headings[at:at + 3] == ["electricity, USD", "egress, USD", "total cost, USD"]
    for agent in ("bace-pipe", "cr-lcf"):  # recomputed from the file, without summarise
        mine = [r for r in rows if r["agent"] == agent]
        cells = _table_cells(table, agent)
        for offset, field in enumerate(("cost_usd", "egress_usd", "total_cost_usd")):
            assert cells[at + offset].startswith(f"{sum(r[field] for r in mine) / len(mine):.1f} ± "), field
    assert float(_table_cells(table, "cr-lcf")[at + 1].split(" ")[0]) > 0  # some egress is billed here
    # rows written before egress was billed: neither column
    old = [{k: v for k, v in r.items() if k not in ("egress_usd", "total_cost_usd")} for r in rows]
    old_headings = _table_headings(mr.render_table("t", old, meta, source))
    assert "egress, USD" not in old_headings and "total cost, USD" not in old_headings
    assert len(old_headings) == len(headings) - 2
    # a file mixing both: the columns show, with "-" for the agent whose rows lack them
    mixed = [r if r["agent"] != "lcf" else old[i] for i, r in enumerate(rows)]
    mixed_table = mr.render_table("t", mixed, meta, source)
    assert _table_headings(mixed_table) == headings
    assert _table_cells(mixed_table, "lcf")[at + 1:at + 3] == ["-", "-"]
    assert _table_cells(mixed_table, "bace-pipe") == _table_cells(table, "bace-pipe")


def test_every_result_file_names_the_command_that_made_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    mr = _make_results()
    sources = mr.sources()
    files = sorted(p.stem for p in mr.DATA.glob("*.json"))
    assert files and set(files) <= set(sources)
    for name in files:
        assert sources[name]["command"].startswith("sfenv ") and sources[name]["date"]
        # which code and env made it, shown in its table's heading
        assert sources[name].get("commit") and sources[name].get("env")
        heading = (mr.RESULTS / f"{name}.md").read_text().split("\n\n")[1]
        assert f"commit {sources[name]['commit']}, env {sources[name]['env']}" in heading
    # a file without an entry is refused
    monkeypatch.setattr(mr, "DATA", tmp_path)
    (tmp_path / "SOURCES.yml").write_text("{}\n")
    (tmp_path / "orphan.json").write_text(json.dumps([{"agent": "fifo"}]))
    with pytest.raises(ValueError, match="orphan.json: no entry"):
        mr.build(figures=False, check=True)


def test_history_page_is_marked_as_not_current():
    text = (DOCS / "history.md").read_text()
    assert "not regenerated" in text and "re-measured" in text.split("##")[0]


def test_citation_and_licence_agree_with_pyproject():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert str(cff["version"]) == VERSION
    assert cff["license"] == LICENSE_ID == "Apache-2.0"
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence


def test_the_carbon_data_ships_with_its_own_licence_notice():
    """The bundled carbon CSV is Electricity Maps' data under ODbL 1.0, not Apache-2.0: its notice is packaged
    beside it and the README names the exception."""
    notice = (ROOT / "sfenv" / "data" / "carbon" / "NOTICE.md").read_text()
    assert "ODbL" in notice and "opendatacommons.org/licenses/odbl/1-0" in notice and "Electricity Maps" in notice
    assert '"data/carbon/NOTICE.md"' in PYPROJECT_TEXT
    readme = (ROOT / "README.md").read_text().split("## License and citation")[1]
    assert "sfenv/data/carbon/NOTICE.md" in readme and "Open Database License" in readme


def test_changelog_lists_every_registered_id():
    from sfenv.registration import ENV_IDS

    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    assert re.search(rf"## \[{re.escape(VERSION)}\]", text)
    for env_id, scenario in ENV_IDS.items():
        assert f"| `{env_id}` | `{scenario}` |" in text, env_id


def test_docs_extra_is_installed_by_run_sh():
    docs_extra = re.search(r"^docs = \[(.*?)\]", PYPROJECT_TEXT, re.M | re.S).group(1)
    assert {"sphinx", "furo", "myst-parser"} <= set(re.findall(r'"([a-z-]+)[<>=]', docs_extra))
    run = (ROOT / "run.sh").read_text()
    assert re.search(r'pip install -q -e "\$here\[[^]]*\bdocs\b[^]]*\]"', run)
    assert " -rs " in run  # skip reasons in the test summary


def test_every_python_m_module_named_in_docs_and_files_exists():
    # e.g. geo-8.yaml's header once named `python -m experiments.derive_geo8`, which no longer existed
    import importlib.util

    files = [ROOT / "README.md", *DOCS.glob("*.md"), *(ROOT / "scenarios").glob("*.yaml"),
             *(ROOT / "sfenv" / "hyperparams").glob("*.yml"), *(ROOT / "examples").glob("*.py"), ROOT / "run.sh",
             *(ROOT / "experiments").glob("*.py"), *(ROOT / "agents").glob("*.py"), *(ROOT / "sfenv").glob("*.py")]
    named = {(m, f.name) for f in files for m in re.findall(r"python3? -m ([A-Za-z_][\w.]*)", f.read_text())}
    ours = {(m, f) for m, f in named if m.split(".")[0] == "sfenv"}
    assert any("derive_geo8" in m for m, _ in ours)
    missing = [(m, f) for m, f in sorted(ours) if importlib.util.find_spec(m) is None]
    assert not missing, f"modules named with python -m that do not exist: {missing}"
    for m, f in named - ours:
        assert m.split(".")[0] in {"rl_zoo3", "sphinx", "pytest", "venv", "pip"}, f"{f}: python -m {m}"


def test_api_reference_documents_every_public_module():
    """Each public module of every layer has its section in docs/api.md (a new module needs one)."""
    import pkgutil
    import re

    import sfenv.agents
    import sfenv.experiments

    import sfenv

    found = [m.name for pkg in (sfenv, sfenv.agents, sfenv.experiments)
             for m in pkgutil.walk_packages(pkg.__path__, f"{pkg.__name__}.")]
    modules = {name for name in [*found, "sfenv.agents", "sfenv.experiments"]
               if not any(part.startswith("_") for part in name.split(".")) and name != "sfenv.scenarios"}
    modules -= {"sfenv.agents", "sfenv.experiments"}  # packages without content of their own
    documented = set(re.findall(r"^\.\. automodule:: (\S+)$", (ROOT / "docs" / "api.md").read_text(), re.M))
    assert {"sfenv.sim.engine", "sfenv.world.topology", "sfenv.agents.base", "sfenv.app.cli"} <= modules
    assert sorted(modules - documented) == []
    assert sorted(documented - modules - {"sfenv"}) == []


def test_no_file_holds_a_merge_conflict_marker():
    """A merge that committed its conflict (docs/carbon.md did from 2026-11-26 to 2026-11-28) shows both sides, or
    breaks code: no tracked text file has a line that is a conflict marker."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    suffixes = {".md", ".py", ".yaml", ".yml", ".toml", ".cfg", ".txt", ".rst", ".sh", ".csv", ".json", ".cff"}
    marked = []
    for name in listed.splitlines():
        path = ROOT / name
        if path.suffix not in suffixes or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======":
                marked.append(f"{name}:{number}")
    assert not marked, marked
