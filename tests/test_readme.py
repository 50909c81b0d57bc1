"""The README stays true: its quick-start code runs, CI runs the test command it gives, and the
Python blocks of the README and of every docs page run (YAML blocks are valid scenarios)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# the README and the site's pages (docs/notes-*.md are drafts the site does not build)
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("notes-"))]
QUICK = "## Ten lines of Python"


def _blocks(lang: str, path: Path) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), re.S)


def test_readme_opens_with_the_two_commands():
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None and README.index(block.group(0)) < README.index("## ")
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["./run.sh", "./run.sh test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash \./run\.sh test\b", ci, re.M)  # CI runs exactly the README's test command


def test_quick_start_code_runs():
    section = README[README.index(QUICK):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    assert len(code.group(1).strip().splitlines()) <= 13  # "ten lines": a short example, as promised
    namespace: dict = {}
    exec(compile(code.group(1), "README.md quick start", "exec"), namespace)
    report = namespace["info"]["episode_report"]
    assert namespace["terminated"] and report["jobs"] == 10 and report["finished"] == 10


def test_readme_links_exist():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs pages"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


# every block but the README's first, the quick start, which test_quick_start_code_runs runs and checks
PYTHON_BLOCKS = [(p, i) for p in PAGES for i, _ in enumerate(_blocks("python", p)) if (p.name, i) != ("README.md", 0)]


@pytest.mark.parametrize(("page", "index"), PYTHON_BLOCKS, ids=[f"{p.name}[{i}]" for p, i in PYTHON_BLOCKS])
def test_every_python_block_runs(page: Path, index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    code = _blocks("python", page)[index]
    if "sb3_contrib" in code:
        pytest.importorskip("sb3_contrib", reason="the rl extra is not installed")
        import torch

        torch.set_num_threads(1)  # as the other SB3 tests: a tiny MLP, and the cores are shared with xdist
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    monkeypatch.setenv("MPLBACKEND", os.environ.get("MPLBACKEND", "Agg"))
    exec(compile(code, f"{page.name} python block {index}", "exec"), {"__name__": "__docs__"})


def test_the_pages_have_python_blocks_and_every_yaml_block_is_a_valid_scenario():
    import yaml

    from sfenv.scenario import load_scenario

    assert len(PYTHON_BLOCKS) >= 6  # the pages' examples
    yamls = [b for p in PAGES for b in _blocks("yaml", p)]
    assert yamls
    for block in yamls:
        sc = load_scenario(yaml.safe_load(block))
        assert sc.name and sc.cfg.workload.num_jobs > 0
