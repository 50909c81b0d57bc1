"""The recommended recipe's env v2 figures in docs/training.md are those of its committed result files.

docs/training.md quotes the recipe's env v2 test-split ratios to the best heuristic ("The recipe's
figures on earlier env versions"); the files they come from are committed under
``docs/results/learned/v2/``.  This test reads the files, checks that they were played with the
recipe's play settings as the bundled config now names them, formats each ratio and its interval as
the page writes it, and finds it there: a figure that no longer matches a result file (or a config
changed without a new test-split run) fails here.  The README quotes env v5's figures, checked by
``tests/test_recipe_table.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "learned" / "v2"
#: the recipe's test-split files (learned_vs_heuristics --split test --seeds 10, docs/training.md, round H)
FILES = {"a": RESULTS / "generalise-rollout-mix-abc-test-split-a.json",
         "b": RESULTS / "generalise-rollout-mix-abc-test-split-b.json"}


def _groups() -> dict[str, dict[str, Any]]:
    a = json.loads(FILES["a"].read_text())
    b = json.loads(FILES["b"].read_text())
    unseen = {Path(name).stem: group for name, group in a["unseen"].items()}
    return {"spider-8-contended": a, "geo-8-contended": unseen["geo-8-contended"],
            "geo-6-contended-heldout": unseen["geo-6-contended-heldout"], "spider-16": b,
            "generated": b["unseen_generated"]}


def test_the_files_were_played_as_the_recipe_says() -> None:
    from sfenv.agents.learned import load_config

    cfg = load_config("generalise-rollout")
    for path in FILES.values():
        res = json.loads(path.read_text())
        assert res["split"] == "test" and len(res["seeds"]) == 10, path
        assert res["play"] == cfg["play"], path
        assert res["play_env"] == cfg["play_env"], path
        assert res.get("play_defer") == cfg.get("play_defer"), path


@pytest.mark.parametrize("group", ["spider-8-contended", "geo-8-contended", "geo-6-contended-heldout", "spider-16",
                                   "generated"])
def test_the_training_page_quotes_each_group_as_measured(group: str) -> None:
    ratio, low, high = _groups()[group]["ratio_to_best"]
    training = " ".join((ROOT / "docs" / "training.md").read_text().split())  # line breaks as spaces
    quoted = f"{ratio:.3f} ({low:.3f}-{high:.3f})"
    assert quoted in training, (group, quoted)


#: the held-out set's files (the same recipe, --split test --seeds 20, docs/training.md, "A larger held-out set")
HELD_OUT = [RESULTS / f"generalise-rollout-mix-abc-heldout-20-{part}.json" for part in "ab"]
HELD_OUT_GROUPS = ["geo-4-contended-heldout-d", "geo-5-contended-heldout-b", "geo-6-contended-heldout",
                   "geo-7-contended-heldout-c", "geo-8-contended"]
#: its later additions (docs/training.md, "Another price year" and "Other cloud regions")
LATER = [RESULTS / f"generalise-rollout-mix-abc-{name}.json" for name in (
    "prices-2022", "prices-2024", "geo-8-other-contended-heldout", "geo-6-other-contended-heldout-b")]
PRICE_YEAR_BASES = ("geo-5-contended-heldout-b", "geo-6-contended-heldout", "geo-8-contended")
LATER_GROUPS = sorted(f"{b}-prices-{y}" for b in PRICE_YEAR_BASES for y in (2022, 2024)) + [
    "geo-6-other-contended-heldout-b", "geo-8-other-contended-heldout"]


def _groups_of(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Each scenario's result in ``paths`` (the played scenario's and its ``--unseen`` ones), by file stem."""
    groups = {}
    for path in paths:
        res = json.loads(path.read_text())
        groups[Path(res["scenario"]).stem] = res
        groups.update({Path(name).stem: group for name, group in res["unseen"].items()})
    return groups


@pytest.mark.parametrize(("paths", "groups"), [(HELD_OUT, HELD_OUT_GROUPS), (LATER, LATER_GROUPS)],
                         ids=["held-out", "later"])
def test_the_held_out_files_were_played_as_the_recipe_says_on_20_test_seeds(paths: list[Path],
                                                                            groups: list[str]) -> None:
    from sfenv.agents.learned import load_config

    cfg = load_config("generalise-rollout")
    for path in paths:
        res = json.loads(path.read_text())
        assert res["split"] == "test" and len(res["seeds"]) == 20, path
        assert (res["play"], res["play_env"], res.get("play_defer")) == (cfg["play"], cfg["play_env"],
                                                                        cfg.get("play_defer")), path
    assert sorted(_groups_of(paths)) == sorted(groups)


@pytest.mark.parametrize("group", HELD_OUT_GROUPS)
def test_the_training_page_quotes_each_held_out_group_as_measured(group: str) -> None:
    """docs/training.md's env v2 table quotes each group's ratio and interval as its file holds them."""
    ratio, low, high = _groups_of(HELD_OUT)[group]["ratio_to_best"]
    training = " ".join((ROOT / "docs" / "training.md").read_text().split())
    assert f"| {group}" in training and f"{ratio:.3f} ({low:.3f}-{high:.3f})" in training, group


@pytest.mark.parametrize("group", LATER_GROUPS)
def test_the_training_page_quotes_each_later_group_as_measured(group: str) -> None:
    """docs/training.md quotes each group's ratio and interval as its file holds them, and no job was unfinished."""
    res = _groups_of(LATER)[group]
    ratio, low, high = res["ratio_to_best"]
    training = " ".join((ROOT / "docs" / "training.md").read_text().split())
    assert f"{ratio:.3f} ({low:.3f}-{high:.3f})" in training, group
    assert all(row["unfinished"] == 0 for name, row in res["summary"].items() if name.startswith("model:")), group


def _assert_validation_figures_quoted(path: Path, cell: str) -> None:
    """Each validation group of ``path`` (one scenario, or generated and cloud-like platforms) is quoted as ``cell``
    says (``{}``: the ratio and interval as the page writes them), and left no job unfinished."""
    res = json.loads(path.read_text())
    groups = [res["unseen_generated"], res["unseen_cloud"]] if res.get("unseen_generated") else [res]
    training = " ".join((ROOT / "docs" / "training.md").read_text().split())
    for group in groups:
        ratio, low, high = group["ratio_to_best"]
        assert cell.format(f"{ratio:.3f} ({low:.3f}-{high:.3f})") in training, path
        assert all(row["unfinished"] == 0 for name, row in group["summary"].items() if name.startswith("model:")), path


@pytest.mark.parametrize("path", sorted((RESULTS / "validation-seeds").glob("*.json")), ids=lambda p: p.stem)
def test_the_training_page_quotes_the_seed_study_as_measured(path: Path) -> None:
    """The recipe retrained with seeds 1 and 2: each validation group's figure as its file holds it."""
    res = json.loads(path.read_text())
    assert res["split"] == "validation" and f"-mix-s{path.stem[len('seed')]}/" in res["model"], path
    _assert_validation_figures_quoted(path, "{}")


@pytest.mark.parametrize("seed", [1, 2])
def test_the_training_page_quotes_the_other_seeds_on_other_regions_as_measured(seed: int) -> None:
    """Seeds 1 and 2 of the recipe on geo-8-other-contended-heldout (test split, 20 seeds): the page's figures."""
    path = RESULTS / f"generalise-rollout-mix-abc-seed{seed}-geo-8-other-contended-heldout.json"
    res = json.loads(path.read_text())
    assert res["split"] == "test" and len(res["seeds"]) == 20 and f"-mix-s{seed}/" in res["model"]
    ratio, low, high = res["ratio_to_best"]
    training = " ".join((ROOT / "docs" / "training.md").read_text().split())
    assert f"seed {seed} is at **{ratio:.3f} ({low:.3f}-{high:.3f})**" in training or (
        f"seed {seed} at **{ratio:.3f} ({low:.3f}-{high:.3f})**" in training)
    assert all(row["unfinished"] == 0 for name, row in res["summary"].items() if name.startswith("model:"))


@pytest.mark.parametrize("path", sorted((RESULTS / "validation-ensemble").glob("*.json")), ids=lambda p: p.stem)
def test_the_training_page_quotes_round_i_as_measured(path: Path) -> None:
    """Round I, the ensemble of the recipe's three seeds: each validation group's figure as its file holds it."""
    res = json.loads(path.read_text())
    assert res["split"] == "validation" and res["model"].endswith(".ensemble.json"), path
    _assert_validation_figures_quoted(path, "| {} |")


#: the privileged oracle and the state-only teacher on env v4, v5 and v6 (expert_vs_heuristic --split test --seeds 10
#: --heuristic spantrain+swf; docs/training.md, "On env v4", "On env v5" and "On env v6")
HEADROOM = ROOT / "docs" / "results" / "headroom"
#: env version -> the WAN settings its headroom files were played under (files before v6 record only the first)
HEADROOM_SIM = {"v4": ("v4", "member"), "v5": ("v5", "member"), "v6": ("v5", "server")}


@pytest.mark.parametrize("version", ["v4", "v5", "v6"])
@pytest.mark.parametrize("name, expert", [("oracle", "lookahead:spantrain+swf:0:proposed"),
                                          ("state-only-spantrain", "lookahead:spantrain+swf:present:proposed")])
def test_the_training_page_quotes_the_headroom_as_measured(name: str, expert: str, version: str) -> None:
    res = json.loads((HEADROOM / version / f"{name}.json").read_text())
    assert res["expert"] == expert and res["heuristic"] == "spantrain+swf"
    assert (res["wan_sharing"], res.get("vm_pair_cap", "member")) == HEADROOM_SIM[version]
    assert res.get("env_version", version) == version  # recorded from env v6 on
    assert res["scenario"] == "spider-8-contended" and res["split"] == "test" and len(res["seeds"]) == 10
    assert res["proposers"] == "best+spantrain"  # the recipe's candidate set
    ratio, low, high = res["ratio"]
    page = " ".join((ROOT / "docs" / "training.md").read_text().split())
    assert f"{ratio:.3f}x ({low:.3f}-{high:.3f})" in page.split(f"On env {version}", 1)[1], name


def test_the_training_page_quotes_variant_43_as_trained() -> None:
    """Variant 43 (twice the labelled steps, env v5): its keep-best evaluations as its files hold them, screened out."""
    folder = ROOT / "docs" / "results" / "learned" / "v5" / "variant-43"
    evals = json.loads((folder / "eval.json").read_text())
    kept = min(evals, key=lambda e: e["mean_jct_h"])
    assert kept["best"] and kept["timesteps"] == 0 and all(e["unfinished"] == 0 for e in evals)
    recipe_h = 2.228  # the recipe's own keep-best figure on env v5 (its run's eval.json, quoted by the page)
    assert kept["mean_jct_h"] > recipe_h * 0.99  # the screen asked at least 1 % lower: not passed
    page = " ".join((ROOT / "docs" / "training.md").read_text().split())
    section = page.split("**Variant 43**", 1)[1].split("### ", 1)[0]
    assert f"**{kept['mean_jct_h']:.3f} h** at step 0" in section and "**the screen is not passed**" in section
    assert f"{evals[1]['mean_jct_h']:.3f} h at step 4,096" in section
    cfg = (folder / "train-generalise-rollout-8000.yml").read_text()
    assert "steps: 8000, rounds: 2" in cfg


@pytest.mark.parametrize("version", ["v4", "v5"])
def test_an_earlier_versions_headroom_is_played_again_by_this_code(version: str, tmp_path: Path) -> None:
    """``expert_vs_heuristic --env-version`` replays a committed earlier version's oracle: its first seed and hash."""
    from sfenv.experiments.expert_vs_heuristic import main as expert_main

    committed = json.loads((HEADROOM / version / "oracle.json").read_text())
    res = expert_main(["--expert", committed["expert"], "--heuristic", committed["heuristic"], "--split", "test",
                       "--seeds", "1", "--env-version", version, "--out", str(tmp_path)])
    assert res["env_version"] == version and res["scenario_sha"] == committed["scenario_sha"]
    assert res["rows"] == committed["rows"][:1]  # the oracle's and the heuristic's episode, to the last bit
