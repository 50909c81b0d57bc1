"""The recommended recipe's env v6 (and v5) figures: its committed result files, the tables printed from them, the docs.

``docs/results/learned/v6/`` (and ``v5/``) holds the recipe retrained on env v6 (v5) and played once on the test
split as ``tests/test_recommended_recipe.py`` plays it.  ``sfenv.experiments.recipe_table`` prints one
Markdown row per group from those files; docs/training.md must hold that table as printed, and the
README and the page's prose the figures the files give: a figure written in by hand, or a config
changed without a new test-split run, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sfenv.experiments import recipe_table

from sfenv.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
LEARNED = ROOT / "docs" / "results" / "learned"
#: each env version's two result files (the current one first)
VERSION_FILES = {version: [LEARNED / version / "generalise-rollout-test-split.json",
                           LEARNED / version / "generalise-rollout-heldout-20.json"] for version in ("v6", "v5")}
FILES = VERSION_FILES["v6"]
TRAINING = "spider-8-contended"
#: the 15 unseen groups the slow test plays (tests/test_recommended_recipe.py), beside the training scenario
UNSEEN = ["geo-8-contended", "spider-16", "geo-6-contended-heldout", "4 generated test platforms",
          "geo-5-contended-heldout-b", "geo-7-contended-heldout-c", "geo-4-contended-heldout-d",
          "geo-8-contended-prices-2022", "geo-8-contended-prices-2024", "geo-6-contended-heldout-prices-2022",
          "geo-6-contended-heldout-prices-2024", "geo-5-contended-heldout-b-prices-2022",
          "geo-5-contended-heldout-b-prices-2024", "geo-8-other-contended-heldout", "geo-6-other-contended-heldout-b"]


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())  # line breaks as spaces


def _groups(version: str = "v6") -> dict[str, tuple[int, dict]]:
    return {name: (seeds, res) for path in VERSION_FILES[version] for name, seeds, res in recipe_table.groups_of(path)}


@pytest.mark.parametrize("version", list(VERSION_FILES))
def test_the_files_were_played_as_the_recipe_says(version: str) -> None:
    from sfenv.agents.learned import load_config

    cfg = load_config("generalise-rollout")
    for path, seeds in zip(VERSION_FILES[version], (10, 20)):
        res = json.loads(path.read_text())
        assert res["split"] == "test" and len(res["seeds"]) == seeds, path
        assert (res["play"], res["play_env"], res.get("play_defer")) == (cfg["play"], cfg["play_env"],
                                                                        cfg.get("play_defer")), path
    assert sorted(_groups(version)) == sorted([TRAINING, *UNSEEN])


@pytest.mark.parametrize("version", list(VERSION_FILES))
def test_the_training_page_holds_the_table_as_printed(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    printed = recipe_table.main([str(path) for path in VERSION_FILES[version]] + ["--training", TRAINING])
    assert capsys.readouterr().out.strip() == printed
    assert len(printed.splitlines()) == 2 + 1 + len(UNSEEN)
    assert printed in (ROOT / "docs" / "training.md").read_text()


def test_the_prose_and_the_readme_say_what_the_files_give() -> None:
    groups = _groups()
    met = [name for name in UNSEEN if recipe_table.verdict(groups[name][1]["ratio_to_best"], False) == "met"]
    missed = sorted(set(UNSEEN) - set(met))
    assert missed == ["geo-5-contended-heldout-b", "geo-5-contended-heldout-b-prices-2024", "geo-6-contended-heldout"]
    most_tb = max(res["summary"][recipe_table._model_name(res["summary"])]["wan_tb"] for _, res in groups.values())
    assert all(row["unfinished"] == 0 for _, res in groups.values()
               for name, row in res["summary"].items() if name.startswith("model:"))
    training, readme = _flat(ROOT / "docs" / "training.md"), _flat(ROOT / "README.md")
    for text in (training, readme):
        assert f"{len(met)} of the 15 unseen groups" in text or f"{len(met)} of its 15 unseen groups" in text
        assert (f"at most {most_tb:.1f} TB between regions per episode" in text if most_tb > 0
                else "moves no byte between regions on any test group" in text)
    for name in (TRAINING, "spider-16", "4 generated test platforms", "geo-5-contended-heldout-b",
                 "geo-6-contended-heldout", "geo-8-other-contended-heldout", "geo-6-other-contended-heldout-b"):
        ratio, low, high = groups[name][1]["ratio_to_best"]
        assert f"{ratio:.3f}x" in readme and f"{low:.3f}-{high:.3f}" in readme, name
    assert recipe_table.verdict(groups[TRAINING][1]["ratio_to_best"], True) == "oracle level **missed**"


@pytest.mark.parametrize(("ratio", "training", "expected"), [
    ((1.0, 0.99, 1.02), False, "met"), ((1.0, 0.99, 1.0201), False, "**missed**"),
    ((0.90, 0.85, 0.919), True, "oracle level met"), ((0.901, 0.85, 0.91), True, "oracle level **missed**"),
    ((0.89, 0.85, 0.92), True, "oracle level **missed**")])
def test_the_verdict_reads_each_target_at_its_edge(ratio: tuple[float, float, float], training: bool,
                                                    expected: str) -> None:
    assert recipe_table.verdict(ratio, training) == expected


def _result(best_tb: float, cost: list[float] | None) -> dict:
    summary = {"model:m.zip": {"wan_tb": 0.25, "unfinished": 2.0}, "fifo": {"wan_tb": best_tb, "unfinished": 0.0}}
    return {"scenario": "x/a.yaml", "seeds": [1, 2], "ratio_to_best": [1.01, 0.995, 1.03], "best_heuristic": "fifo",
            "summary": summary, "total_cost_usd_ratio_to_best": cost, "unseen": {}}


def test_a_row_reads_its_group() -> None:
    row = recipe_table.row("a", 2, _result(3.0, [0.5, 0.4, 0.6]))
    assert row == "| a | 2 | 1.010 (0.995-1.030) | `fifo` | 0.2 vs 3.0 | 0.500 (0.400-0.600) | 2 | **missed** |"
    assert "| - |" in recipe_table.row("a", 2, _result(0.0, None))  # no cost ratio: the heuristic cost nothing


def test_a_file_that_is_not_a_result_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"scenario": "a", "seeds": [1]}))
    with pytest.raises(InvalidInput, match="bad.json: not a learned_vs_heuristics result file"):
        recipe_table.groups_of(bad)
    no_model = tmp_path / "no-model.json"
    res = _result(3.0, None)
    del res["summary"]["model:m.zip"]
    no_model.write_text(json.dumps(res))
    with pytest.raises(InvalidInput, match="no-model.json: group a: not a learned_vs_heuristics result"):
        recipe_table.table([no_model])
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    run = subprocess.run([sys.executable, "-m", "sfenv.experiments.recipe_table", str(broken)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    missing = subprocess.run([sys.executable, "-m", "sfenv.experiments.recipe_table", "nope.json"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        "sfenv: nope.json: cannot read the result file (No such file or directory)"]
    assert run.stderr.strip().splitlines() == [f"sfenv: {broken}: not a JSON learned_vs_heuristics result file "
                                               "(Expecting property name enclosed in double "
                                               "quotes: line 1 column 2 (char 1))"]


def test_deep_nesting_and_a_huge_integer_are_one_line(tmp_path: Path) -> None:
    deep, huge = tmp_path / "deep.json", tmp_path / "huge.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    huge.write_text('{"seeds": ' + "9" * 100_000 + "}")
    with pytest.raises(InvalidInput, match=r"deep.json: not a JSON learned_vs_heuristics result file \(nested"):
        recipe_table.groups_of(deep)
    with pytest.raises(InvalidInput, match=r"huge.json: not a JSON learned_vs_heuristics result file \(an integer"):
        recipe_table.groups_of(huge)
